package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
)

// The API keys of the policy stacks' tenants: each test works in a tenant
// of its own, so that budgets and cached results of one do not reach
// another.
const (
	keySpend   = "policy-spend-key-7c1d9e0a4b2f"   // tenant spend: budgets
	keyReuse   = "policy-reuse-key-52a8f1c3d6e0"   // tenant reuse: the result cache
	keyOther   = "policy-other-key-0f9e8d7c6b5a"   // tenant other: the cache's tenant scope
	keyConsent = "policy-consent-key-3b4c5d6e7f80" // tenant consent: approvals
	keyNightly = "policy-nightly-key-9a8b7c6d5e4f" // tenant batch, key named nightly: a budget on one key
	keyAdhoc   = "policy-adhoc-key-1e2d3c4b5a69"   // tenant batch, another key
)

// policyKeys is the API key file both replicas read.
const policyKeys = `keys:
  - {tenant: spend, key: ` + keySpend + `}
  - {tenant: reuse, key: ` + keyReuse + `}
  - {tenant: other, key: ` + keyOther + `}
  - {tenant: consent, key: ` + keyConsent + `}
  - {tenant: batch, name: nightly, key: ` + keyNightly + `}
  - {tenant: batch, name: adhoc, key: ` + keyAdhoc + `}
`

// policyTools are the tools of policyCatalog, each a webhook to the
// test's toolHook.
var policyTools = []string{"metered", "costly", "probe", "plain", "lookup", "slowlookup", "brief", "deploy", "release"}

// policyCatalog is the worker's catalog: webhook tools served by the hook
// at base, with the cost, cache and approval entries of issue 24 as an
// operator writes them.
func policyCatalog(base string) string {
	entry := func(name, desc, extra string) string {
		return fmt.Sprintf(`  - name: %s
    description: %q
    input_schema: {type: object}
    timeout: 1m
    backend: webhook
    webhook: {url: "%s/tools/%s"}
%s`, name, desc, base, name, extra)
	}
	return "version: 1\ntools:\n" +
		entry("metered", "Counts one execution per call; spent from a budget.", "") +
		entry("costly", "Counts one execution per call; each call costs 3 units.", "    cost: 3\n") +
		entry("probe", "Counts one execution per call; its budget tells when a replica knows the budgets.", "") +
		entry("plain", "Counts one execution per call; not cached.", "") +
		entry("lookup", "A read that may be answered from the cache for ten minutes.",
			"    idempotent: true\n    cache: {ttl: 10m, scope: tenant}\n") +
		entry("slowlookup", "A slow read (about a second) that may be answered from the cache.",
			"    idempotent: true\n    cache: {ttl: 10m}\n") +
		entry("brief", "A read whose cached result lives two seconds.",
			"    hints: {read_only: true}\n    cache: {ttl: 2s}\n") +
		entry("deploy", "Deploys a service: every call waits for a person's approval.",
			"    approval: always\n") +
		entry("release", "Releases to a target: a production target waits for a person's approval, two seconds at most.",
			"    approval:\n      when:\n        input.target: \"prod-*\"\n      timeout: 2s\n")
}

// policyStack is the system of issue 24's tests as processes: a
// nats-server, two orchestrator replicas (r1, r2) on it reading the same
// API keys, and one worker process serving policyCatalog, whose tools are
// served by hook in the test process. Everything is killed when the test
// ends.
type policyStack struct {
	t        *testing.T
	dir      string
	natsURL  string
	replicas []*policyReplica
	worker   *proctest.Proc
	hook     *toolHook
	client   *http.Client
}

// policyReplica is one `orchestrator serve` process.
type policyReplica struct {
	name string // its --instance
	addr string // its HTTP address, host:port
	cmd  proctest.Command
	proc *proctest.Proc
}

// startPolicyStack starts the stack and waits until both replicas are
// ready and list every tool of the catalog.
func startPolicyStack(t *testing.T) *policyStack {
	t.Helper()
	dir := t.TempDir()
	ports := natstest.FreePorts(t, 3)
	s := &policyStack{t: t, dir: dir, natsURL: fmt.Sprintf("nats://127.0.0.1:%d", ports[0]), hook: newToolHook(t)}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	s.client = &http.Client{Transport: tr, Timeout: 2 * time.Minute}

	nats := proctest.Command{
		Name: "nats-server", Path: natsServerBin, Dir: dir, LogTail: 4000,
		Args: []string{"--jetstream", "--store_dir", filepath.Join(dir, "jetstream"), "--addr", "127.0.0.1",
			"--port", strconv.Itoa(ports[0]), "--server_name", "policy"},
	}.Start(t)
	nats.Eventually(waitLong, "JetStream to answer", func() bool {
		ok := false
		natstest.WithJS(s.natsURL, func(ctx context.Context, j js.JetStream) {
			_, err := j.AccountInfo(ctx)
			ok = err == nil
		})
		return ok
	})

	keys := filepath.Join(dir, "keys.yaml")
	cat := filepath.Join(dir, "tools.yaml")
	for path, content := range map[string]string{keys: policyKeys, cat: policyCatalog(s.hook.srv.URL)} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The first replica provisions the streams and buckets; the second
	// starts once it is ready, so that they do not race to create them.
	for i := range 2 {
		r := &policyReplica{name: fmt.Sprintf("r%d", i+1), addr: fmt.Sprintf("127.0.0.1:%d", ports[1+i])}
		r.cmd = proctest.Command{
			Name: "replica " + r.name, Path: orchestratorBin, LogTail: 8000,
			Args: []string{"serve", "--nats-url", s.natsURL, "--workers", "0", "--http", r.addr,
				"--instance", r.name, "--api-keys", keys, "--drain-timeout", "5s", "--http-drain-timeout", "5s",
				"--async-lease", "6s"}, // a killed replica's tasks are adopted 6 s after its last refresh, not 15
		}
		r.proc = r.cmd.Start(t)
		r.proc.WaitHTTP(r.url("/readyz"), waitLong)
		s.replicas = append(s.replicas, r)
	}
	s.worker = proctest.Command{
		Name: "worker", Path: workerBin, LogTail: 8000,
		Args: []string{"--nats-url", s.natsURL, "--tools", cat, "--builtin-tools=none", "--id", "w1", "--concurrency", "64"},
	}.Start(t)
	for _, r := range s.replicas {
		s.waitTools(r)
	}
	return s
}

// url is the address of path on replica r.
func (r *policyReplica) url(path string) string { return "http://" + r.addr + path }

// restart kills replica r with SIGKILL and starts it again with the same
// flags but another --instance, as a supervisor does with the default (a
// random id), and waits until it is ready. (The same --instance at once
// is refused until the dead one's result consumer lapses, 5 minutes.)
func (s *policyStack) restart(t *testing.T, r *policyReplica) {
	t.Helper()
	r.proc.Kill()
	s.client.CloseIdleConnections()
	r.proc = r.cmd.Start(t) // under the same --instance, as a supervisor restarts it
	r.proc.WaitHTTP(r.url("/readyz"), waitLong)
	s.waitTools(r)
}

// waitTools waits until GET /v1/tools on r lists every tool of the
// catalog (the worker announced them and r's catalog has seen them).
func (s *policyStack) waitTools(r *policyReplica) {
	s.t.Helper()
	r.proc.Eventually(waitLong, "the catalog's tools listed by "+r.name, func() bool {
		if s.worker.Exited() {
			s.t.Fatalf("the worker exited (%s):\n%s", s.worker.Status(), s.worker.Output())
		}
		req, _ := http.NewRequest(http.MethodGet, r.url("/v1/tools"), nil)
		req.Header.Set("Authorization", "Bearer "+keyReuse)
		resp, err := s.client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
			return false
		}
		seen := map[string]bool{}
		for _, tool := range list.Tools {
			seen[tool.Name] = true
		}
		for _, name := range policyTools {
			if !seen[name] {
				return false
			}
		}
		return true
	})
}

// cli runs `orchestrator args... --nats-url <the stack's>`: the flag
// comes last, after the positional arguments, as an operator adds it to
// a command they copied from the docs.
func (s *policyStack) cli(t *testing.T, args ...string) cliRun {
	t.Helper()
	return runCLI(t, waitLong, append(args, "--nats-url", s.natsURL)...)
}

// mustCLI is cli failing the test unless the command exits 0.
func (s *policyStack) mustCLI(t *testing.T, args ...string) cliRun {
	t.Helper()
	r := s.cli(t, args...)
	if r.code != 0 {
		t.Fatalf("orchestrator %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// metric is the sum of the samples of name in replica r's /metrics whose
// labels include every one of labels (`key="value"`).
func (s *policyStack) metric(t *testing.T, r *policyReplica, name string, labels ...string) float64 {
	t.Helper()
	resp, err := s.client.Get(r.url("/metrics"))
	if err != nil {
		t.Fatalf("metrics of %s: %v", r.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics of %s: %v", r.name, err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); all && err == nil {
			sum += v
		}
	}
	return sum
}

// metricAll is metric summed over both replicas.
func (s *policyStack) metricAll(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for _, r := range s.replicas {
		sum += s.metric(t, r, name, labels...)
	}
	return sum
}

// spec is one tool_use block of a request: its input is raw JSON, sent
// as written (key order and whitespace included).
type spec struct {
	id, tool, input string
}

// use is a spec with a fresh tool_use id.
func use(tool, input string) spec { return spec{id: newCallID(), tool: tool, input: input} }

// anthropicTurn is the assistant message holding calls.
func anthropicTurn(calls ...spec) string {
	blocks := make([]string, len(calls))
	for i, c := range calls {
		blocks[i] = fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, c.id, c.tool, c.input)
	}
	return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
}

// reply is one HTTP answer of the API.
type reply struct {
	status  int
	header  http.Header
	body    string
	results []resultBlock // the tool_result blocks of a 200 or 429 answer
}

// resultBlock is a tool_result block of an Anthropic answer.
type resultBlock struct {
	ID      string `json:"tool_use_id"`
	IsError bool   `json:"is_error"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// text is the block's text content.
func (b resultBlock) text() string {
	var sb strings.Builder
	for _, c := range b.Content {
		sb.WriteString(c.Text)
	}
	return sb.String()
}

// cacheOutcomes is the answer's Toolpool-Cache header, one outcome per
// call (nil when absent).
func (r reply) cacheOutcomes() []string {
	h := r.header.Get("Toolpool-Cache")
	if h == "" {
		return nil
	}
	out := strings.Split(h, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// do sends req with the key and reads the answer; the results are parsed
// for a 200 or 429 of the calls.
func (s *policyStack) do(req *http.Request, key string) (reply, error) {
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := s.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: string(body)}
	if r.status == http.StatusOK || r.status == http.StatusTooManyRequests {
		var msg struct {
			Role    string        `json:"role"`
			Content []resultBlock `json:"content"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			return r, fmt.Errorf("%d answer is not an Anthropic message: %v: %s", r.status, err, body)
		}
		r.results = msg.Content
	}
	return r, nil
}

// post posts calls as one turn to replica r with the key, the headers
// hdr (may be nil) and the query (e.g. "?timeout=1m"). It is safe in any
// goroutine: it returns its problems rather than failing the test.
func (s *policyStack) post(ctx context.Context, r *policyReplica, key string, hdr http.Header, query string, calls ...spec) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url("/v1/tool_calls"+query), strings.NewReader(anthropicTurn(calls...)))
	if err != nil {
		return reply{}, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	got, err := s.do(req, key)
	if err == nil && (got.status == http.StatusOK || got.status == http.StatusTooManyRequests) {
		err = checkAnswers(got, calls)
	}
	return got, err
}

// checkAnswers checks that a turn's answer has one result per call, in
// order.
func checkAnswers(got reply, calls []spec) error {
	if len(got.results) != len(calls) {
		return fmt.Errorf("%d results for %d calls: %s", len(got.results), len(calls), got.body)
	}
	for i, c := range calls {
		if got.results[i].ID != c.id {
			return fmt.Errorf("result %d answers %q, want %q", i, got.results[i].ID, c.id)
		}
	}
	return nil
}

// mustPost is post from the test's goroutine, failing the test on an
// error or a status other than want.
func (s *policyStack) mustPost(t *testing.T, r *policyReplica, key string, hdr http.Header, want int, calls ...spec) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	got, err := s.post(ctx, r, key, hdr, "?timeout=1m", calls...)
	if err != nil {
		t.Fatalf("POST to %s: %v", r.name, err)
	}
	if got.status != want {
		t.Fatalf("POST to %s: %d, want %d: %s", r.name, got.status, want, got.body)
	}
	return got
}

// toolHook is the HTTP service behind the catalog's webhook tools: it
// counts each tool's executions and answers "<tool> run <n> for <input>",
// n counting the tool's executions from 1. slowlookup takes at least a
// second, and holds its executions until release is closed (or 20 s).
type toolHook struct {
	srv     *httptest.Server
	mu      sync.Mutex
	runs    map[string][]string // per tool, the inputs of its executions in order
	release chan struct{}
	once    sync.Once
}

// newToolHook starts the hook on loopback; it stops when the test ends.
func newToolHook(t *testing.T) *toolHook {
	h := &toolHook{runs: map[string][]string{}, release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(func() {
		h.releaseSlow()
		h.srv.Close()
	})
	return h
}

func (h *toolHook) serve(w http.ResponseWriter, r *http.Request) {
	tool, ok := strings.CutPrefix(r.URL.Path, "/tools/")
	body, err := io.ReadAll(r.Body)
	if !ok || err != nil {
		http.Error(w, "no such tool", http.StatusNotFound)
		return
	}
	h.mu.Lock()
	h.runs[tool] = append(h.runs[tool], string(body))
	n := len(h.runs[tool])
	h.mu.Unlock()
	if tool == "slowlookup" {
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
			return
		}
		select {
		case <-h.release:
		case <-time.After(20 * time.Second):
		case <-r.Context().Done():
			return
		}
	}
	fmt.Fprintf(w, "%s run %d for %s", tool, n, body)
}

// count is how many times tool ran.
func (h *toolHook) count(tool string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.runs[tool])
}

// releaseSlow lets slowlookup's executions finish.
func (h *toolHook) releaseSlow() { h.once.Do(func() { close(h.release) }) }

// wroteRequest is a context whose requests call f once their body is
// written (httptrace).
func wroteRequest(ctx context.Context, f func()) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { f() },
	})
}

// jsonObjects is every JSON object in the JSON text data, at any depth:
// the records a command's --json output lists, whatever it wraps them in.
func jsonObjects(data string) ([]map[string]any, error) {
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		// One object per line (JSON Lines) is fine too.
		var all []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
			objs, lerr := jsonObjects(line)
			if lerr != nil || strings.TrimSpace(line) == "" {
				return nil, errors.Join(err, lerr)
			}
			all = append(all, objs...)
		}
		return all, nil
	}
	var out []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			out = append(out, x)
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out, nil
}

// str is obj[key] as text: a string as it is, anything else as JSON.
func str(obj map[string]any, key string) string {
	switch v := obj[key].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
