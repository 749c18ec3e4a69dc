package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/testbin"
	"github.com/toolpool/toolpool/jetstream"
)

// mcpServe is `orchestrator serve` with the demo tools and the reference
// MCP server (@modelcontextprotocol/server-everything, stdio) served as
// pooled tools under the prefix ev_ (and a catalog server, broken, that
// does not start), its /mcp guarded by a token.
type mcpServe struct {
	proc  *proctest.Proc
	http  string // host:port
	nats  string // host:port of its embedded NATS server
	token string
}

func startMCPServe(t *testing.T) *mcpServe {
	t.Helper()
	node, entry := everythingServer(t)
	tmp := t.TempDir()
	catalog := filepath.Join(tmp, "tools.yaml")
	if err := os.WriteFile(catalog, []byte(`tools:
  - name: everything
    backend: mcp
    timeout: 60s
    mcp:
      command: [`+quoteYAML(node)+`, `+quoteYAML(entry)+`, stdio]
      tools: [echo, trigger-long-running-operation]
      prefix: ev_
  - name: broken
    backend: mcp
    mcp:
      command: [`+quoteYAML(node)+`, -e, "process.stderr.write('no config file'); process.exit(3)"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &mcpServe{http: natstest.FreeAddr(t), nats: natstest.FreeAddr(t), token: "e2e-mcp-token-0123456789"}
	s.proc = proctest.Start(t, orchestratorBin, "serve",
		"--data-dir", filepath.Join(tmp, "data"), "--nats-listen", s.nats, "--http", s.http,
		"--workspace", filepath.Join(tmp, "ws"), "--tools", catalog, "--workers", "1",
		"--mcp-token", s.token, "--drain-timeout", "5s")
	s.proc.WaitHTTP("http://"+s.http+"/readyz", waitLong)
	return s
}

func (s *mcpServe) url() string { return "http://" + s.http + "/mcp" }

// tsClientResult is what e2e/testdata/mcp-client.mjs prints.
type tsClientResult struct {
	Tools       []string `json:"tools"`
	Annotations map[string]struct {
		ReadOnly    *bool `json:"readOnlyHint"`
		Destructive *bool `json:"destructiveHint"`
		Idempotent  *bool `json:"idempotentHint"`
		OpenWorld   *bool `json:"openWorldHint"`
	} `json:"annotations"`
	Results []struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"results"`
	Progress [][]struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
	} `json:"progress"`
}

// The official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// e2e/package-lock.json) as a client of serve's /mcp: it lists the live
// tools (the demo tools and the reference server's, pooled), calls echo
// and a failing flaky through the pool, and gets the reference server's
// trigger-long-running-operation progress relayed by the pool as
// notifications/progress.
func TestMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	s := startMCPServe(t)
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "e2e", "testdata", "mcp-client.mjs")
	calls, _ := json.Marshal([]map[string]any{
		{"name": "echo", "arguments": map[string]any{"text": "from typescript"}},
		{"name": "flaky", "arguments": map[string]any{"fail": "404"}},
		{"name": "ev_trigger-long-running-operation", "arguments": map[string]any{"duration": 2, "steps": 4}},
	})
	node, _ := everythingServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, s.url(), string(calls))
	cmd.Env = append(os.Environ(), "TOOLPOOL_MCP_TOKEN="+s.token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\nstderr: %s", err, stderr.String())
	}
	var got tsClientResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the TypeScript client printed %q: %v", out, err)
	}
	for _, want := range []string{"echo", "sleep", "flaky", "ev_echo", "ev_trigger-long-running-operation"} {
		if !slices.Contains(got.Tools, want) {
			t.Errorf("tools/list = %v; want %s among them", got.Tools, want)
		}
	}
	// The reference server's annotations of its tool reach the host through
	// the pool: read-only, not destructive, idempotent, closed world.
	is := func(p *bool, want bool) bool { return p != nil && *p == want }
	if a, ok := got.Annotations["ev_trigger-long-running-operation"]; !ok || !is(a.ReadOnly, true) || !is(a.Destructive, false) ||
		!is(a.Idempotent, true) || !is(a.OpenWorld, false) {
		t.Errorf("annotations of ev_trigger-long-running-operation = %+v; want the reference server's (read-only, not destructive, idempotent, closed world)", got.Annotations["ev_trigger-long-running-operation"])
	}
	if len(got.Results) != 3 {
		t.Fatalf("results = %+v; want 3", got.Results)
	}
	if r := got.Results[0]; r.IsError || len(r.Content) != 1 || r.Content[0].Text != "from typescript" {
		t.Errorf("echo = %+v; want the text back", r)
	}
	if r := got.Results[1]; !r.IsError || len(r.Content) == 0 || r.Content[0].Text == "" {
		t.Errorf("flaky 404 = %+v; want isError with the model's text", r)
	}
	if r := got.Results[2]; r.IsError {
		t.Errorf("the long-running operation = %+v; want success", r)
	}
	if p := got.Progress[2]; len(p) == 0 {
		t.Errorf("no notifications/progress reached the TypeScript client for the long-running operation")
	} else {
		for i := 1; i < len(p); i++ {
			if p[i].Progress < p[i-1].Progress {
				t.Errorf("progress went backwards: %+v", p)
			}
		}
	}
}

// Under orchestrator serve, an MCP server of the catalog that does not
// start is a detail of /readyz, with its error, that keeps serve ready:
// its other tools are served (and the server is retried).
func TestMCPServerDownIsADetailOfServe(t *testing.T) {
	t.Parallel()
	s := startMCPServe(t)
	resp, err := http.Get("http://" + s.http + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(rep.Checks["mcp:broken"], "no config file") || rep.Checks["mcp:everything"] != "ok" {
		t.Fatalf("/readyz: %d %+v; want 200 with the broken server's error as a detail", resp.StatusCode, rep)
	}
}

// A go-sdk client that cancels a running sleep (the MCP host's
// notifications/cancelled): the worker's call ends at once, and nothing is
// retried or dead-lettered — the pool's metrics count one cancelled call
// and no dead letter.
func TestMCPCancelRunningCall(t *testing.T) {
	t.Parallel()
	s := startMCPServe(t)
	hc := &http.Client{Transport: tokenTransport{token: s.token, next: http.DefaultTransport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "toolpool-e2e"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url(), HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	callCtx, cancelCall := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 120000}})
		done <- err
	}()
	eventually(t, "the sleep call to run on the worker", func() bool {
		return metricValue(t, s.http, "toolpool_worker_calls_in_flight", `tool="sleep"`) == 1
	})
	cancelCall()
	if err := <-done; err == nil {
		t.Error("CallTool returned no error after its ctx was cancelled")
	}
	eventually(t, "the worker to count the call cancelled", func() bool {
		return metricValue(t, s.http, "toolpool_worker_calls_finished_total", `outcome="cancelled"`, `tool="sleep"`) == 1
	})
	if n := metricValue(t, s.http, "toolpool_worker_calls_in_flight", `tool="sleep"`); n != 0 {
		t.Errorf("sleep calls in flight after the cancel = %v; want 0", n)
	}
	// Settled for good: TOOL_CALLS is a work queue, so a call handed back
	// or retried (a nak with a delay) would stay in it until its next
	// attempt, and a dead letter is counted before its call is removed.
	j, err := js.New(natstest.Connect(t, "nats://"+s.nats))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cancelled call to leave TOOL_CALLS", func() bool { return streamState(t, j, jetstream.StreamCalls).Msgs == 0 })
	for _, outcome := range []string{"retry", "dead_letter"} {
		if n := metricValue(t, s.http, "toolpool_worker_calls_finished_total", `outcome="`+outcome+`"`, `tool="sleep"`); n != 0 {
			t.Errorf("sleep calls with outcome %s = %v; want none for a cancelled call", outcome, n)
		}
	}
}

// tokenTransport adds a bearer token to every request.
type tokenTransport struct {
	token string
	next  http.RoundTripper
}

func (b tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// metricValue is the sum of the samples of name on addr's /metrics whose
// labels contain every one of labels; 0 when there is none.
func metricValue(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// The official TypeScript SDK's tasks (revision 2025-11-25's shape:
// client.experimental.tasks) against two serve replicas on one
// JetStream: the capabilities and each tool's taskSupport are read, a
// task-augmented call runs through the SDK's own polling loop, a task
// created on one replica is answered (tasks/get, tasks/result) by the
// other, and a task cancelled on the other reads cancelled.
func TestMCPTasksTypeScriptClient(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	natsAddr, httpA, httpB := natstest.FreeAddr(t), natstest.FreeAddr(t), natstest.FreeAddr(t)
	token := "e2e-mcp-token-0123456789"
	a := proctest.Start(t, orchestratorBin, "serve",
		"--data-dir", filepath.Join(tmp, "data"), "--nats-listen", natsAddr, "--http", httpA,
		"--workspace", filepath.Join(tmp, "ws"), "--mcp-token", token, "--drain-timeout", "5s")
	a.WaitHTTP("http://"+httpA+"/readyz", waitLong)
	b := proctest.Start(t, orchestratorBin, "serve", "--nats-url", "nats://"+natsAddr, "--http", httpB,
		"--mcp-token", token, "--drain-timeout", "5s")
	b.WaitHTTP("http://"+httpB+"/readyz", waitLong)

	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	node, _ := everythingServer(t)
	urls, _ := json.Marshal([]string{"http://" + httpA + "/mcp", "http://" + httpB + "/mcp"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "e2e", "testdata", "mcp-tasks-client.mjs"), string(urls),
		`{"name":"echo","arguments":{"text":"from a task"}}`, `{"name":"sleep","arguments":{"ms":60000}}`)
	cmd.Env = append(os.Environ(), "TOOLPOOL_MCP_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\nstderr: %s", err, stderr.String())
	}
	type task struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	type result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	var got struct {
		Capabilities *struct {
			Requests struct {
				Tools struct {
					Call *struct{} `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"capabilities"`
		TaskSupport map[string]*string `json:"taskSupport"`
		Stream      []struct {
			Type   string `json:"type"`
			Task   task   `json:"task"`
			Result result `json:"result"`
			Error  string `json:"error"`
		} `json:"stream"`
		Elsewhere struct {
			Created task   `json:"created"`
			Result  result `json:"result"`
			Task    task   `json:"task"`
		} `json:"elsewhere"`
		Cancelled   task `json:"cancelled"`
		AfterCancel task `json:"afterCancel"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the TypeScript client printed %q: %v", out, err)
	}
	if got.Capabilities == nil || got.Capabilities.Requests.Tools.Call == nil {
		t.Errorf("capabilities.tasks = %+v; want requests.tools.call", got.Capabilities)
	}
	if s := got.TaskSupport["echo"]; s == nil || *s != "optional" {
		t.Errorf("echo's execution.taskSupport = %v; want optional", s)
	}
	types := []string{}
	for _, m := range got.Stream {
		types = append(types, m.Type)
	}
	if len(got.Stream) < 2 || got.Stream[0].Type != "taskCreated" || got.Stream[0].Task.TaskID == "" {
		t.Fatalf("callToolStream yielded %v; want taskCreated first", types)
	}
	last := got.Stream[len(got.Stream)-1]
	if last.Type != "result" || last.Result.IsError || len(last.Result.Content) != 1 || last.Result.Content[0].Text != "from a task" {
		t.Errorf("callToolStream yielded %v, last %+v; want the echo's result last", types, last)
	}
	if r := got.Elsewhere.Result; r.IsError || len(r.Content) != 1 || r.Content[0].Text != "from a task" || got.Elsewhere.Task.Status != "completed" {
		t.Errorf("a task of replica A read on replica B: %+v", got.Elsewhere)
	}
	if got.Cancelled.Status != "cancelled" || got.AfterCancel.Status != "cancelled" {
		t.Errorf("a task cancelled on B: %+v, then on A %+v; want cancelled", got.Cancelled, got.AfterCancel)
	}
}
