package toolpool_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/tools"
)

// TestConcurrencyFiguresAgree: a worker's "worker started" line, `tools
// --workers` (LiveTools) and the console name the same two numbers the
// same way: the worker's slots (ServerConfig.Concurrency, over all its
// tools) and the tool's fleet-wide cap (Tool.Concurrency, default 1000).
// A newcomer saw "concurrency 256" in the log and "concurrency 1000" under
// the same worker in `tools --workers`, two numbers under one name.
func TestConcurrencyFiguresAgree(t *testing.T) {
	t.Parallel()
	p := setup(t)
	var logs natstest.LockedBuffer
	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: p.reg, Workers: 1, Concurrency: 7,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	var started string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `msg="worker started"`) {
			started = line
		}
	}
	if !strings.Contains(started, " slots=7") || strings.Contains(started, "concurrency=") {
		t.Errorf("worker started line = %q, want slots=7 and no bare concurrency", started)
	}

	var w toolpool.LiveWorker
	natstest.Eventually(t, time.Minute, "the worker announced", func() bool {
		live, err := toolpool.LiveTools(t.Context(), p.nc, natstest.Logger(t))
		if err != nil || len(live) == 0 || len(live[0].Workers) == 0 {
			return false
		}
		w = live[0].Workers[0]
		return true
	})
	if w.Slots != 7 || w.Concurrency != tools.ConcurrencyDefault {
		t.Errorf("tools --workers: slots %d, concurrency %d; want the worker's 7 slots and the tool's cap %d",
			w.Slots, w.Concurrency, tools.ConcurrencyDefault)
	}
}
