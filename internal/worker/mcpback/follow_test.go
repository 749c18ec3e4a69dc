package mcpback_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/worker/mcpback/internal/mcptest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// TestWorkerFollowsItsServers: a worker's tools follow its MCP servers,
// through a pool whose orchestrator routes by the live catalog (the
// workers' announcements). A tool the server adds at runtime (it sends
// list_changed) is announced and callable; a tool it removes leaves the
// live catalog and the worker's pulls; a server that is down at first
// and comes up later has its tools served without restarting the worker,
// and its check turns from its error to nil.
func TestWorkerFollowsItsServers(t *testing.T) {
	t.Parallel()
	srv, nc, _ := natstest.StartProvisioned(t)
	var up atomic.Bool
	live := httpConfig(httpServer(t, mcptest.Options{}))
	late := httpConfig(gatedHTTPServer(t, mcptest.Options{}, &up))
	late.Name, late.Prefix, late.Sessions = "late", "late_", 1
	late.RestartMin, late.RestartMax = 20*time.Millisecond, 100*time.Millisecond
	reg, set := startSet(t, live, late)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := set.Checks()[1].Func(ctx); err == nil {
		t.Fatal("the check of the server that is down holds")
	}
	server := pooltest.StartServer(t, srv.ClientURL(), reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false })
	set.Follow(server, natstest.Logger(t))
	orch := pooltest.StartOrchestrator(t, nc, nil)
	b := &testBundle{set: set, reg: reg, d: orch.Dispatcher()}
	announced := func(name string) bool {
		return slices.ContainsFunc(orch.Definitions(ctx), func(d tools.Definition) bool { return d.Name == name })
	}
	eventually(t, "web_echo announced", func() bool { return announced("web_echo") })

	// Added at runtime.
	if res := b.call(t, "web_add", `{"text":"shout"}`); res.IsError {
		t.Fatalf("web_add: %+v", res)
	}
	eventually(t, "web_shout announced", func() bool { return announced("web_shout") })
	if res := b.call(t, "web_shout", `{"text":"added at runtime"}`); res.IsError || res.Content.Text() != "added at runtime" {
		t.Fatalf("web_shout: %+v", res)
	}
	if res := b.call(t, "web_shout", `{"text":5}`); !res.IsError || res.Class != envelope.ClassValidation {
		t.Fatalf("web_shout with a bad argument: %+v; want it validated against the server's schema", res)
	}

	// Removed.
	if res := b.call(t, "web_drop", `{"text":"shout"}`); res.IsError {
		t.Fatalf("web_drop: %+v", res)
	}
	eventually(t, "web_shout withdrawn", func() bool { return !announced("web_shout") })
	for _, w := range server.Workers() {
		if slices.Contains(w.Serving(), "web_shout") {
			t.Fatalf("worker %s still pulls web_shout: %v", w.ID(), w.Serving())
		}
	}
	// The catalog remembers the tool for a while (a worker may come back):
	// no worker serves it now.
	if res := b.call(t, "web_shout", `{"text":"x"}`); !res.IsError || res.Code != classify.CodeNoWorker {
		t.Fatalf("web_shout after its removal: %+v; want no_worker", res)
	}
	if res := b.call(t, "web_echo", `{"text":"still served"}`); res.IsError || res.Content.Text() != "still served" {
		t.Fatalf("web_echo: %+v", res)
	}

	// Added back: served again, as registered.
	if res := b.call(t, "web_add", `{"text":"shout"}`); res.IsError {
		t.Fatalf("web_add again: %+v", res)
	}
	eventually(t, "web_shout announced again", func() bool { return announced("web_shout") })
	if res := b.call(t, "web_shout", `{"text":"back"}`); res.IsError || res.Content.Text() != "back" {
		t.Fatalf("web_shout added back: %+v", res)
	}

	// The server that was down comes up.
	if announced("late_echo") {
		t.Fatal("a tool of the server that is down is announced")
	}
	up.Store(true)
	eventually(t, "late_echo announced", func() bool { return announced("late_echo") })
	if res := b.call(t, "late_echo", `{"text":"late but here"}`); res.IsError || res.Content.Text() != "late but here" {
		t.Fatalf("late_echo: %+v", res)
	}
	if err := set.Checks()[1].Func(ctx); err != nil {
		t.Fatalf("the check of the server that came up: %v", err)
	}
}

// eventually polls cond until it holds, failing the test after a generous
// bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, 30*time.Second, what, cond)
}
