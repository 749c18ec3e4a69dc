package cli

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
)

// A shutdown stops the components in the reverse order they were deferred,
// each with a ctx bounded by its drain (0: ended at once; NoDrain: none),
// logs the stops that fail, and does it once.
func TestShutdownStopsInReverseOrder(t *testing.T) {
	t.Parallel()
	var order []string
	deadlines := map[string]bool{}
	stop := func(name string, err error) func(context.Context) error {
		return func(ctx context.Context) error {
			order = append(order, name)
			_, deadlines[name] = ctx.Deadline()
			if name == "http" && ctx.Err() == nil {
				t.Errorf("the stop of a drain of 0 has a ctx that is not done")
			}
			return err
		}
	}
	log := &natstest.LockedBuffer{}
	sd := &Shutdown{Role: "test", Logger: slog.New(slog.NewTextHandler(log, nil))}
	sd.Defer("embedded server", NoDrain, stop("embedded server", nil), "")
	sd.Defer("workers", time.Minute, stop("workers", errors.New("calls left")), "drain timeout passed")
	sd.Defer("http", 0, stop("http", nil), "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came
	if err := sd.Wait(ctx, nil); err != nil {
		t.Fatalf("Wait = %v, want nil after a signal", err)
	}
	sd.Stop() // again: nothing left
	if want := []string{"http", "workers", "embedded server"}; !slices.Equal(order, want) {
		t.Errorf("stopped %v, want %v", order, want)
	}
	if !deadlines["workers"] || !deadlines["http"] || deadlines["embedded server"] {
		t.Errorf("deadlines %v: want one for the drains, none for NoDrain", deadlines)
	}
	if !strings.Contains(log.String(), "drain timeout passed") || !strings.Contains(log.String(), "shutting down") {
		t.Errorf("the log lacks the failed stop or the shutdown:\n%s", log.String())
	}
}

// Wait ends when the command's work is done, and stops everything.
func TestShutdownWaitEndsWithRun(t *testing.T) {
	t.Parallel()
	stopped := false
	sd := &Shutdown{Role: "test", Logger: slog.New(slog.DiscardHandler)}
	sd.Defer("orchestrator", time.Second, func(context.Context) error { stopped = true; return nil }, "")
	ran := false
	if err := sd.Wait(context.Background(), func(ctx context.Context) { ran = ctx.Err() == nil }); err != nil || !ran || !stopped {
		t.Errorf("Wait = %v, ran with a live ctx %v, stopped %v; want nil, true, true", err, ran, stopped)
	}
}

// A NATS connection closed for good ends the wait with ErrConnClosed, so
// that the binary exits non-zero.
func TestShutdownConnClosedForGood(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.ClientURL())
	sd := &Shutdown{Role: "test", Logger: slog.New(slog.DiscardHandler)}
	sd.Conn(nc)
	done := make(chan error, 1)
	go func() { done <- sd.Wait(context.Background(), nil) }()
	nc.Close() // closed for good
	select {
	case err := <-done:
		if !errors.Is(err, ErrConnClosed) {
			t.Errorf("Wait = %v, want ErrConnClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Wait did not end when the connection closed for good")
	}
}
