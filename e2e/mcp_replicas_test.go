package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/testbin"
)

// The official TypeScript SDK's client (2025-11-25, Mcp-Session-Id)
// against two serve replicas on one JetStream behind a round-robin proxy:
// each request goes to the other replica than the one before, so the
// session one replica opened is served by the other on every second
// request (its signed id, checked with the key both read from JetStream).
// It lists the tools and calls them, a failing one and one with progress
// included.
func TestMCPTypeScriptClientAcrossReplicas(t *testing.T) {
	t.Parallel()
	first := startMCPServe(t)
	second := natstest.FreeAddr(t)
	proc := proctest.Start(t, orchestratorBin, "serve",
		"--nats-url", "nats://"+first.nats, "--http", second, "--mcp-token", first.token, "--drain-timeout", "5s")
	proc.WaitHTTP("http://"+second+"/readyz", waitLong)

	var mu sync.Mutex
	served := map[string]int{}
	var proxies []*httputil.ReverseProxy
	var hosts []string
	for _, h := range []string{first.http, second} {
		u, _ := url.Parse("http://" + h)
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1 // SSE
		proxies = append(proxies, p)
		hosts = append(hosts, h)
	}
	n := 0
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := n % len(proxies)
		n++
		served[hosts[i]+" "+r.Method]++
		mu.Unlock()
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)

	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "e2e", "testdata", "mcp-client.mjs")
	calls, _ := json.Marshal([]map[string]any{
		{"name": "echo", "arguments": map[string]any{"text": "one"}},
		{"name": "echo", "arguments": map[string]any{"text": "two"}},
		{"name": "flaky", "arguments": map[string]any{"fail": "404"}},
		{"name": "echo", "arguments": map[string]any{"text": "three"}},
		{"name": "ev_trigger-long-running-operation", "arguments": map[string]any{"duration": 1, "steps": 2}},
	})
	node, _ := everythingServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, lb.URL+"/mcp", string(calls))
	cmd.Env = append(os.Environ(), "TOOLPOOL_MCP_TOKEN="+first.token)
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
	if !slices.Contains(got.Tools, "echo") || !slices.Contains(got.Tools, "ev_trigger-long-running-operation") {
		t.Errorf("tools/list = %v", got.Tools)
	}
	if len(got.Results) != 5 {
		t.Fatalf("results = %+v; want 5", got.Results)
	}
	for i, want := range map[int]string{0: "one", 1: "two", 3: "three"} {
		if r := got.Results[i]; r.IsError || len(r.Content) != 1 || r.Content[0].Text != want {
			t.Errorf("echo %d = %+v; want %q", i, r, want)
		}
	}
	if r := got.Results[2]; !r.IsError {
		t.Errorf("flaky 404 = %+v; want isError", r)
	}
	if r := got.Results[4]; r.IsError {
		t.Errorf("the long-running operation = %+v; want success", r)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range hosts {
		if served[h+" POST"] < 3 {
			t.Errorf("replica %s served %v", h, served)
		}
	}
}
