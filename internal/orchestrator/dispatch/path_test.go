package dispatch

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// startLoopback starts a dispatcher whose publishes are answered at once
// by loopbackJS (path_bench_test.go): the dispatcher's own path, no server.
func startLoopback(t *testing.T, log *slog.Logger, mod ...func(*Config)) *Dispatcher {
	t.Helper()
	lj := &loopbackJS{}
	cfg := Config{JS: lj, Instance: "loop", Catalog: discovery.StaticCatalog("echo"), MaxQueueDepth: -1, NoQueueWaitAdmission: true,
		ResultCheckInterval: -1, Logger: log}
	for _, m := range mod {
		m(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lj.d = d
	startLocal(t, d)
	return d
}

// A result delivered to its waiter is not logged as a result for an
// unknown call.
func TestDeliveredResultNotLoggedUnknown(t *testing.T) {
	t.Parallel()
	var buf natstest.LockedBuffer
	d := startLoopback(t, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	res, err := d.Dispatch(context.Background(), "s", []envelope.ToolUseBlock{use("toolu_1", "echo", `{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].IsError || res[0].Content.Text() != `{"text":"hi"}` {
		t.Fatalf("result = %+v", res[0])
	}
	if strings.Contains(buf.String(), "unknown call") {
		t.Errorf("a delivered result was logged as unknown:\n%s", buf.String())
	}
}

// A turn owns its results: a caller that changes the content it got does
// not change what a repeat of the call gets from the cache.
func TestResultOwnedByTurn(t *testing.T) {
	t.Parallel()
	d := startLoopback(t, nil)
	calls := []envelope.ToolUseBlock{use("toolu_1", "echo", `{"text":"hi"}`)}
	first, err := d.Dispatch(context.Background(), "s", calls)
	if err != nil {
		t.Fatal(err)
	}
	first[0].Content[0].Text = "changed by the caller"
	again, err := d.Dispatch(context.Background(), "s", calls)
	if err != nil {
		t.Fatal(err)
	}
	if got := again[0].Content.Text(); got != `{"text":"hi"}` {
		t.Errorf("the repeat got %q from the cache, want the tool's output", got)
	}
}
