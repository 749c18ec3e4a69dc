package toolpool_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/natstest"
)

// TestHTTPServerOffLoopbackNeedsCredentials: an HTTP server on an address
// that is not loopback runs tools for anyone who reaches it unless the
// Orchestrator has API keys; NewHTTPServer refuses it, naming both ways
// out, and lets it through with keys or with InsecureNoAuth. Loopback
// needs neither.
func TestHTTPServerOffLoopbackNeedsCredentials(t *testing.T) {
	t.Parallel()
	p := setup(t)
	newOrch := func(keys []toolpool.APIKey) *toolpool.Orchestrator {
		o, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, APIKeys: keys, NoPoisonWatcher: true, Logger: natstest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	open := newOrch(nil)
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		_, err := open.NewHTTPServer(toolpool.HTTPServerConfig{Addr: addr})
		if err == nil || !strings.Contains(err.Error(), "APIKeys") || !strings.Contains(err.Error(), "InsecureNoAuth") {
			t.Errorf("NewHTTPServer(%s) without API keys = %v, want a refusal naming APIKeys and InsecureNoAuth", addr, err)
		}
		if _, err := open.NewHTTPServer(toolpool.HTTPServerConfig{Addr: addr, InsecureNoAuth: true}); err != nil {
			t.Errorf("NewHTTPServer(%s) with InsecureNoAuth: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		if _, err := open.NewHTTPServer(toolpool.HTTPServerConfig{Addr: addr}); err != nil {
			t.Errorf("NewHTTPServer(%s) on loopback: %v", addr, err)
		}
	}
	keyed := newOrch([]toolpool.APIKey{{Tenant: "team-a", Key: "key-a-0123456789abcdef"}})
	if _, err := keyed.NewHTTPServer(toolpool.HTTPServerConfig{Addr: "0.0.0.0:0"}); err != nil {
		t.Errorf("NewHTTPServer off loopback with API keys: %v", err)
	}
}

// TestAPIKeyWithNoTools: a key whose Tools is an empty list may list and
// call no tool, while a key without Tools may use all of them. The empty
// list must survive the way from OrchestratorConfig to the key set (it
// once went through JSON with omitempty and came back as "all tools").
func TestAPIKeyWithNoTools(t *testing.T) {
	t.Parallel()
	p := setup(t)
	p.startWorkers(t, 1, 2)
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, NoPoisonWatcher: true, Logger: natstest.Logger(t),
		APIKeys: []toolpool.APIKey{
			{Tenant: "none", Key: "none-0123456789abcdef", Tools: []string{}},
			{Tenant: "all", Key: "all-0123456789abcdefg"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orch.Stop(context.Background()) })
	srv := httptest.NewServer(orch.Handler())
	t.Cleanup(srv.Close)
	list := func(key string) string {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/tools: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	natstest.Eventually(t, time.Minute, "the key without Tools to see hold", func() bool {
		return strings.Contains(list("all-0123456789abcdefg"), `"hold"`)
	})
	if got := list("none-0123456789abcdef"); strings.Contains(got, `"hold"`) {
		t.Errorf("a key with Tools: []string{} lists %s, want no tool", got)
	}
	body := `{"role":"assistant","content":[{"type":"tool_use","id":"n1","name":"hold","input":{}}]}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/tool_calls?timeout=10s", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer none-0123456789abcdef")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"is_error":true`) || !strings.Contains(string(b), "no tool named") {
		t.Errorf("a call of hold with a key of no tools: %d %s, want an is_error result saying there is no such tool", resp.StatusCode, b)
	}
}
