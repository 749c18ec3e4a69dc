package lb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/testdeps"
)

// mcpPath is the MCP endpoint of the replicas (and so of the proxy).
const mcpPath = "/mcp"

// hop is one HTTP exchange a client made through the proxy.
type hop struct {
	method, replica string
	status          int
}

// hopRecorder is an http.RoundTripper that notes, per request, the
// replica the proxy named in its answer.
type hopRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	hops []hop
}

func (h *hopRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.hops = append(h.hops, hop{method: req.Method, replica: resp.Header.Get(replicaHeader), status: resp.StatusCode})
	h.mu.Unlock()
	return resp, nil
}

func (h *hopRecorder) all() []hop {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.hops)
}

// checkAlternating fails the test unless the replicas, in order, hold
// both r1 and r2 and change at least once per two requests: round robin
// without stickiness hands consecutive requests of one client to
// different replicas.
func checkAlternating(t *testing.T, what string, replicas []string) {
	t.Helper()
	t.Logf("%s: replicas in order: %v", what, replicas)
	count := map[string]int{}
	switches := 0
	for i, r := range replicas {
		count[r]++
		if i > 0 && r != replicas[i-1] {
			switches++
		}
	}
	if count["r1"] == 0 || count["r2"] == 0 {
		t.Errorf("%s: requests by replica %v, want both r1 and r2", what, count)
	}
	if len(replicas) > 1 && switches < (len(replicas)-1)/2 {
		t.Errorf("%s: consecutive requests changed replica %d times in %d, want round robin: %v", what, switches, len(replicas)-1, replicas)
	}
}

// mcpPosts is the replicas of the proxy's logged POST /mcp requests, in
// order, failing the test for any answered with an error status.
func (s *stack) mcpPosts(t *testing.T) []string {
	t.Helper()
	var rs []string
	for _, l := range s.proxyLog() {
		if l.method != http.MethodPost || !strings.HasPrefix(l.uri, mcpPath) {
			continue
		}
		if l.status >= 400 {
			t.Errorf("the proxy logged POST %s answered %d by %s", l.uri, l.status, l.replica)
		}
		rs = append(rs, l.replica)
	}
	return rs
}

// TestMCPGoSDKAcrossReplicas connects the go-sdk client through the
// proxy: it negotiates revision 2026-07-28 (stateless: no initialize, no
// session), lists the tools and calls one several times, each request
// landing on the replica after the last one's.
func TestMCPGoSDKAcrossReplicas(t *testing.T) {
	t.Parallel()
	s := startStack(t, stackConfig{workers: 1, concurrency: 8})
	rec := &hopRecorder{next: &http.Transport{}}
	t.Cleanup(rec.next.(*http.Transport).CloseIdleConnections)
	hc := &http.Client{Transport: rec, Timeout: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "toolpool-lb-e2e", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.lbURL + mcpPath, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated revision %q, want 2026-07-28 (stateless)", v)
	}
	for i := range 3 {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list %d: %v", i, err)
		}
		if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == napTool }) {
			t.Fatalf("tools/list %d does not list %s", i, napTool)
		}
	}
	for i := range 6 {
		marker := fmt.Sprintf("gosdk_%d", i)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: napTool, Arguments: map[string]any{"marker": marker}})
		if err != nil {
			t.Fatalf("tools/call %d: %v", i, err)
		}
		if got := mcpText(res.Content); res.IsError || got != "napped "+marker {
			t.Errorf("tools/call %d: %q (isError %v), want %q", i, got, res.IsError, "napped "+marker)
		}
	}
	var posts []string
	for _, h := range rec.all() {
		if h.status >= 400 {
			t.Errorf("%s %s answered %d by %s", h.method, mcpPath, h.status, h.replica)
		}
		if h.method == http.MethodPost {
			posts = append(posts, h.replica)
		}
	}
	checkAlternating(t, "go-sdk client", posts)
	s.checkRanOnce(t, "gosdk_", 6)
}

// mcpText joins the text of content.
func mcpText(content []mcp.Content) string {
	var b strings.Builder
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// checkRanOnce fails the test unless the tool ran exactly n calls whose
// marker begins with prefix, each once.
func (s *stack) checkRanOnce(t *testing.T, prefix string, n int) {
	t.Helper()
	ran := 0
	for m, ws := range s.executions() {
		if !strings.HasPrefix(m, prefix) {
			continue
		}
		ran++
		if len(ws) != 1 {
			t.Errorf("call %s ran %d times: %v", m, len(ws), ws)
		}
	}
	if ran != n {
		t.Errorf("%d calls %s* ran, want %d", ran, prefix, n)
	}
}

// nodeModules is node and e2e/node_modules with e2e's pinned packages,
// pkg among them (testdeps.NodeModules installs them from the lockfile
// when missing).
func nodeModules(t *testing.T, pkg string) (node, dir string) {
	t.Helper()
	node, dir = testdeps.NodeModules(t)
	if _, err := os.Stat(filepath.Join(dir, pkg, "package.json")); err != nil {
		t.Fatalf("%s is not in e2e/package-lock.json: %v", pkg, err)
	}
	return node, dir
}

// runNode runs node with args in dir and returns its stdout, failing the
// test (with its stderr) when it fails.
func runNode(t *testing.T, node, dir string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// TestMCPTypeScriptSDKAcrossReplicas runs a client of the TypeScript SDK
// (1.32.2, revision 2025-11-25 with a session) through the proxy: it
// initializes, lists the tools and calls one several times, its
// consecutive requests landing on different replicas.
func TestMCPTypeScriptSDKAcrossReplicas(t *testing.T) {
	t.Parallel()
	node, modules := nodeModules(t, "@modelcontextprotocol/sdk")
	s := startStack(t, stackConfig{workers: 1, concurrency: 8})
	var calls []map[string]any
	for i := range 6 {
		calls = append(calls, map[string]any{"name": napTool, "arguments": map[string]any{"marker": fmt.Sprintf("ts_%d", i)}})
	}
	callsJSON, _ := json.Marshal(calls)
	script := filepath.Join(filepath.Dir(modules), "testdata", "mcp-client.mjs")
	out := runNode(t, node, filepath.Dir(script), script, s.lbURL+mcpPath, string(callsJSON))
	var got struct {
		Tools   []string `json:"tools"`
		Results []struct {
			IsError bool `json:"isError"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client's output: %v: %s", err, out)
	}
	if !slices.Contains(got.Tools, napTool) {
		t.Errorf("tools/list %v does not list %s", got.Tools, napTool)
	}
	if len(got.Results) != len(calls) {
		t.Fatalf("%d results, want %d: %s", len(got.Results), len(calls), out)
	}
	for i, r := range got.Results {
		want := fmt.Sprintf("napped ts_%d", i)
		if r.IsError || len(r.Content) != 1 || r.Content[0].Text != want {
			t.Errorf("tools/call %d: %+v, want %q", i, r, want)
		}
	}
	s.waitMCPPosts(len(calls) + 2)
	checkAlternating(t, "TypeScript SDK", s.mcpPosts(t))
	s.checkRanOnce(t, "ts_", len(calls))
}

// waitMCPPosts waits until the proxy has logged at least n POST /mcp
// requests (it logs each once answered).
func (s *stack) waitMCPPosts(n int) {
	s.t.Helper()
	s.lb.Eventually(waitLong, fmt.Sprintf("the proxy to log %d POST %s", n, mcpPath), func() bool {
		return len(s.routed(http.MethodPost, mcpPath)) >= n
	})
}

// routed is the replicas of the logged requests with method and
// a path beginning with prefix, in order.
func (s *stack) routed(method, prefix string) []string {
	var rs []string
	for _, l := range s.proxyLog() {
		if l.method == method && strings.HasPrefix(l.uri, prefix) {
			rs = append(rs, l.replica)
		}
	}
	return rs
}

// inspector runs the MCP Inspector CLI (its bin, with node: no npx) on
// the proxy's /mcp with args and decodes its JSON output into v.
func inspector(t *testing.T, s *stack, v any, args ...string) {
	t.Helper()
	node, modules := nodeModules(t, "@modelcontextprotocol/inspector-cli")
	build := filepath.Join(modules, "@modelcontextprotocol", "inspector-cli", "build")
	// The CLI reads its own package.json relative to the working
	// directory: run it in its build folder.
	out := runNode(t, node, build, append([]string{filepath.Join(build, "cli.js"), "--cli", s.lbURL + mcpPath, "--transport", "http"}, args...)...)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("the Inspector CLI's output: %v: %s", err, out)
	}
}

// TestMCPInspectorCLIAcrossReplicas runs the MCP Inspector CLI through
// the proxy: tools/list and tools/call, each run a new session whose
// requests land on different replicas.
func TestMCPInspectorCLIAcrossReplicas(t *testing.T) {
	t.Parallel()
	s := startStack(t, stackConfig{workers: 1, concurrency: 8})
	var listed struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	inspector(t, s, &listed, "--method", "tools/list")
	if !slices.ContainsFunc(listed.Tools, func(tl struct {
		Name string `json:"name"`
	}) bool {
		return tl.Name == napTool
	}) {
		t.Errorf("tools/list %+v does not list %s", listed.Tools, napTool)
	}
	for i := range 2 {
		marker := fmt.Sprintf("inspector_%d", i)
		var res struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		inspector(t, s, &res, "--method", "tools/call", "--tool-name", napTool, "--tool-arg", "marker="+marker)
		if res.IsError || len(res.Content) != 1 || res.Content[0].Text != "napped "+marker {
			t.Errorf("tools/call %d: %+v, want %q", i, res, "napped "+marker)
		}
	}
	// Each run initializes and sends its request: 2 POSTs at least.
	s.waitMCPPosts(2 * 3)
	checkAlternating(t, "Inspector CLI", s.mcpPosts(t))
	s.checkRanOnce(t, "inspector_", 2)
}
