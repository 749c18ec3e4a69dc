package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/testdeps"
	"github.com/toolpool/toolpool/internal/worker/catalog"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// everythingServer is the entry point of the reference MCP server that
// e2e/package-lock.json pins (testdeps.NodeModules installs it when
// missing).
func everythingServer(t *testing.T) (node, entry string) {
	t.Helper()
	node, dir := testdeps.NodeModules(t)
	entry = filepath.Join(dir, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("the reference MCP server is not in e2e/node_modules: %v", err)
	}
	return node, entry
}

// startEverythingOverHTTP starts the reference MCP server in its
// streamable-HTTP mode on addr (a loopback host:port).
func startEverythingOverHTTP(t *testing.T, node, entry, addr string) *proctest.Proc {
	t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	return proctest.Command{
		Name: "server-everything", Path: node, Args: []string{entry, "streamableHttp"},
		Env: append(os.Environ(), "PORT="+port),
	}.Start(t)
}

// TestEverythingServerAsPooledTools serves @modelcontextprotocol/server-everything
// (stdio, on Node.js) through a catalog's mcp entry as pool tools: its echo
// answers, a tool called with a bad argument is refused by the pool's
// schema check (the server's own schema) before it is sent, and
// trigger-long-running-operation's progress reaches tools.ReportProgress.
func TestEverythingServerAsPooledTools(t *testing.T) {
	t.Parallel()
	node, entry := everythingServer(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tools.yaml")
	yaml := `tools:
  - name: everything
    backend: mcp
    timeout: 30s
    retry: {max_attempts: 2, base_delay: 100ms}
    mcp:
      command: [` + quoteYAML(node) + `, ` + quoteYAML(entry) + `, stdio]
      tools: [echo, get-sum, trigger-long-running-operation]
      prefix: ev_
      sessions: 2
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := catalog.Load(file, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The server's tools land in a registry of their own first, so that the
	// long-running tool's handler can be given a progress listener.
	scratch := tools.NewRegistry()
	set, err := f.StartMCP(ctx, scratch, catalog.MCPOptions{Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Stop(context.Background()) })
	if err := set.Checks()[0].Func(ctx); err != nil {
		t.Fatalf("the everything server is not up: %v", err)
	}
	if got, want := scratch.Names(), []string{"ev_echo", "ev_get-sum", "ev_trigger-long-running-operation"}; !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
	var mu sync.Mutex
	var progress []tools.Progress
	reg := tools.NewRegistry()
	for _, name := range scratch.Names() {
		rt, _ := scratch.Lookup(name)
		tl := rt.Tool
		if name == "ev_trigger-long-running-operation" {
			inner := tl.Handler
			tl.Handler = func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
				return inner(tools.WithProgressReporter(ctx, func(p tools.Progress) {
					mu.Lock()
					progress = append(progress, p)
					mu.Unlock()
				}), input)
			}
		}
		reg.MustRegister(tl)
	}

	srv, nc, _ := natstest.StartProvisioned(t)
	pooltest.StartServer(t, srv.ClientURL(), reg)
	d := pooltest.StartOrchestrator(t, nc, discovery.RegistryCatalog(reg)).Dispatcher()
	call := func(tool, input string) envelope.Result {
		t.Helper()
		res, err := d.Dispatch(ctx, "session", []envelope.ToolUseBlock{{Type: "tool_use", ID: newCallID(), Name: tool, Input: json.RawMessage(input)}})
		if err != nil {
			t.Fatalf("Dispatch %s: %v", tool, err)
		}
		return res[0]
	}

	if res := call("ev_echo", `{"message":"hello, everything"}`); res.IsError || res.Content.Text() != "Echo: hello, everything" {
		t.Errorf("echo: %+v %q", res, res.Content.Text())
	}
	rt, _ := reg.Lookup("ev_echo")
	if rt.Description != "Echoes back the input string" || !rt.Idempotent || rt.Timeout != 30*time.Second || rt.Retry.MaxAttempts != 2 {
		t.Errorf("ev_echo is served as %+v", rt.Tool)
	}
	res := call("ev_get-sum", `{"a": 1, "b": "two"}`)
	if !res.IsError || res.Class != envelope.ClassValidation || !strings.Contains(res.Content.Text(), "b") {
		t.Errorf("get-sum with a bad argument: %+v %q", res, res.Content.Text())
	}
	if res := call("ev_get-sum", `{"a": 1, "b": 2}`); res.IsError || !strings.Contains(res.Content.Text(), "3") {
		t.Errorf("get-sum: %+v %q", res, res.Content.Text())
	}
	res = call("ev_trigger-long-running-operation", `{"duration": 1, "steps": 3}`)
	if res.IsError || !strings.Contains(res.Content.Text(), "Long running operation completed") {
		t.Fatalf("trigger-long-running-operation: %+v %q", res, res.Content.Text())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []tools.Progress{{Progress: 1, Total: 3}, {Progress: 2, Total: 3}, {Progress: 3, Total: 3}}
	// The SDK may hand a notification to its handler after the result has
	// arrived, when the call listens no more: the last reports may be
	// missing, never out of order.
	if len(progress) == 0 || !slices.Equal(progress, want[:len(progress)]) {
		t.Errorf("progress reported: %+v, want %+v", progress, want)
	}
}

// quoteYAML quotes s as a YAML (JSON) string.
func quoteYAML(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestWorkerServesMCPCatalog runs the worker binary with a catalog of two
// MCP servers: the reference server, whose echo an orchestrator's call
// reaches through the live catalog, and one that exits at start, which
// leaves the worker serving the rest, with the failure in the log, in a
// metric and in /readyz.
func TestWorkerServesMCPCatalog(t *testing.T) {
	t.Parallel()
	node, entry := everythingServer(t)
	srv, _, _ := natstest.StartProvisioned(t)
	file := filepath.Join(t.TempDir(), "tools.yaml")
	yaml := `tools:
  - name: everything
    backend: mcp
    mcp:
      command: [` + quoteYAML(node) + `, ` + quoteYAML(entry) + `, stdio]
      tools: [echo]
      prefix: ev_
  - name: broken
    backend: mcp
    mcp:
      command: [` + quoteYAML(node) + `, -e, "process.stderr.write('no config file'); process.exit(3)"]
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsAddr := natstest.FreeAddr(t)
	proc := proctest.Start(t, workerBin, "--nats-url", srv.ClientURL(), "--tools", file, "--demo-tools",
		"--metrics", metricsAddr, "--id", "mcp-worker")

	ready := func() (int, string) {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	eventually(t, "the worker's /readyz reports the broken server", func() bool {
		_, body := ready()
		return strings.Contains(body, `"mcp:broken"`) && strings.Contains(body, "no config file")
	})
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, `"mcp:everything":"ok"`) {
		t.Errorf("/readyz: %d %s", code, body)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The broken server is tried again in the background: each attempt counts.
	for _, want := range []string{`toolpool_mcp_start_failures_total{server="broken"} `, `toolpool_mcp_sessions_up{server="everything"} 1`} {
		if !strings.Contains(string(scrape), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(scrape), `toolpool_mcp_start_failures_total{server="broken"} 0`) {
		t.Errorf("/metrics counts no start failure of the broken server")
	}
	if !strings.Contains(proc.Output(), "an MCP server did not start") {
		t.Errorf("no error logged for the broken server")
	}

	run := runCLI(t, time.Minute, "call", "--nats-url", srv.ClientURL(), "ev_echo", `{"message":"from the CLI"}`)
	if run.code != 0 || !strings.Contains(run.stdout, "Echo: from the CLI") {
		t.Fatalf("call ev_echo: exit %d\n%s\n%s", run.code, run.stdout, run.stderr)
	}
	if run := runCLI(t, time.Minute, "call", "--nats-url", srv.ClientURL(), "echo", `{"text":"demo"}`); run.code != 0 {
		t.Fatalf("call echo: exit %d\n%s", run.code, run.stderr)
	}
}

// TestEverythingServerOverHTTP serves the reference server's tools from its
// streamable-HTTP mode (a process the test starts on a loopback port): its
// echo answers through the pool's handler, with its progress relayed.
func TestEverythingServerOverHTTP(t *testing.T) {
	t.Parallel()
	node, entry := everythingServer(t)
	addr := natstest.FreeAddr(t)
	startEverythingOverHTTP(t, node, entry, addr).WaitListening(addr, waitLong)
	file := filepath.Join(t.TempDir(), "tools.yaml")
	yaml := `tools:
  - name: everything
    backend: mcp
    mcp:
      url: http://` + addr + `/mcp
      tools: [echo, trigger-long-running-operation]
      prefix: ev_
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := catalog.Load(file, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	set, err := f.StartMCP(t.Context(), reg, catalog.MCPOptions{Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Stop(context.Background()) })
	if err := set.Checks()[0].Func(t.Context()); err != nil {
		t.Fatalf("the everything server is not up: %v", err)
	}
	rt, ok := reg.Lookup("ev_echo")
	if !ok {
		t.Fatalf("served %v", reg.Names())
	}
	out, err := rt.Handler(t.Context(), json.RawMessage(`{"message":"over HTTP"}`))
	if err != nil || out.Content.Text() != "Echo: over HTTP" {
		t.Fatalf("echo: %v %+v", err, out)
	}
	rt, _ = reg.Lookup("ev_trigger-long-running-operation")
	var mu sync.Mutex
	var progress []tools.Progress
	ctx := tools.WithProgressReporter(t.Context(), func(p tools.Progress) {
		mu.Lock()
		progress = append(progress, p)
		mu.Unlock()
	})
	if _, err := rt.Handler(ctx, json.RawMessage(`{"duration": 1, "steps": 3}`)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 || progress[0] != (tools.Progress{Progress: 1, Total: 3}) {
		t.Errorf("progress over HTTP: %+v", progress)
	}
}

// A worker whose only tools come from an MCP server that is not up yet
// starts anyway, serving nothing; when the server comes up, its tools are
// served and callable through the pool, with no restart.
func TestWorkerWaitsForItsOnlyMCPServer(t *testing.T) {
	t.Parallel()
	node, entry := everythingServer(t)
	srv, _, _ := natstest.StartProvisioned(t)
	addr := natstest.FreeAddr(t)
	file := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte(`tools:
  - name: everything
    backend: mcp
    mcp:
      url: http://`+addr+`/mcp
      tools: [echo]
      prefix: late_
`), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := proctest.Start(t, workerBin, "--nats-url", srv.ClientURL(), "--tools", file, "--id", "waiting-worker")
	// Up with nothing to serve, and still up once it has tried the server
	// again: Eventually fails at once if the worker exits meanwhile.
	proc.WaitFor("workers started", waitLong)
	proc.WaitFor("an MCP server still does not start; trying again", waitLong)

	startEverythingOverHTTP(t, node, entry, addr)
	// The worker's retry (with backoff) finds the server up and serves its
	// tools, and says so; only then is a call worth a process. Before, a
	// call was made every 10 ms from the server's start on, each an
	// orchestrator process (a start, a connection, an "unknown tool"
	// answer), for the seconds node and the worker's backoff took.
	proc.WaitFor("an MCP server that did not start is up; serving its tools", waitLong)
	var last cliRun
	pollEvery(t, 250*time.Millisecond, "late_echo to answer through the pool", func() bool {
		last = runCLI(t, 20*time.Second, "call", "--nats-url", srv.ClientURL(), "--timeout", "10s", "late_echo", `{"message":"came up"}`)
		return last.code == 0 && strings.Contains(last.stdout, "Echo: came up")
	})
	if last.code != 0 {
		t.Fatalf("late_echo: exit %d\n%s\n%s", last.code, last.stdout, last.stderr)
	}
}
