package toolpool_test

import (
	"strings"
	"testing"

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
