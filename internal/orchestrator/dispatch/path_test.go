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

// ackSequences reads what js.Msg's Metadata reads from both forms of
// the ack subject.
func TestAckSequences(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reply          string
		stream, consum uint64
		ok             bool
	}{
		{"$JS.ACK.TOOL_RESULTS.results_a_1.1.4021.17.1700000000000000000.0", 4021, 17, true},
		{"$JS.ACK._.ABCHASH.TOOL_RESULTS.results_a_1.1.4021.17.1700000000000000000.0.xyz", 4021, 17, true},
		{"$JS.ACK.hub.ABCHASH.TOOL_RESULTS.results_a_1.2.9.3.1700000000000000000.5", 9, 3, true},
		{"$JS.ACK.TOOL_RESULTS.c.1.x.17.1.0", 0, 0, false},
		{"$JS.ACK.a.b.c", 0, 0, false},
		{"_INBOX.abc", 0, 0, false},
		{"", 0, 0, false},
	} {
		s, c, ok := ackSequences(tc.reply)
		if s != tc.stream || c != tc.consum || ok != tc.ok {
			t.Errorf("ackSequences(%q) = %d, %d, %v; want %d, %d, %v", tc.reply, s, c, ok, tc.stream, tc.consum, tc.ok)
		}
	}
}
