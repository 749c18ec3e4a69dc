package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/pkg/tools"
)

// A handler the worker abandoned (it ignored its cancellation) does not
// hold up Stop: the call was answered, so Stop returns nil at once while
// the handler is still stuck. Goroutines are reused between calls; this
// holds the reuse to that.
func TestStopDoesNotWaitForAbandonedHandler(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	stuck := tool("stuck", func(context.Context, json.RawMessage) (tools.Output, error) {
		<-release // ignores ctx
		return tools.Text("too late"), nil
	})
	stuck.Timeout = 100 * time.Millisecond
	stuck.Retry.MaxAttempts = 1
	b := setup(t, stuck)
	w := b.start(t, func(c *worker.Config) { c.AbandonGrace = 100 * time.Millisecond })
	defer close(release) // after Stop: goleak then sees the handler end

	if r := b.results.await(t, b.publish(t, "stuck", `{}`)); !r.IsError {
		t.Fatalf("result %+v; want the timeout is_error", r)
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		stopped <- w.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(waitLong + 5*time.Second):
		t.Fatal("Stop did not return while an abandoned handler was stuck")
	}
}

// A worker stopped before it started is stopped at once, and cannot start.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	b := setup(t, tool("idle", func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ok"), nil }))
	w, err := worker.New(worker.Config{JetStream: b.js, Registry: b.reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-w.Stopped():
	case <-time.After(waitLong):
		t.Fatal("Stopped not closed")
	}
	if err := w.Start(context.Background()); err == nil {
		t.Error("Start after Stop succeeded")
	}
}

// A handler that ignores the cancellation of a stopping worker (its
// timeout far away) is abandoned after AbandonGrace: the worker is
// Stopped while the handler is still stuck.
func TestStoppedWhileHandlerIgnoresShutdown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	stuck := tool("stuck", func(context.Context, json.RawMessage) (tools.Output, error) {
		started <- struct{}{}
		<-release // ignores ctx
		return tools.Text("too late"), nil
	})
	stuck.Timeout = time.Hour
	b := setup(t, stuck)
	w := b.start(t, func(c *worker.Config) { c.AbandonGrace = 100 * time.Millisecond })
	defer close(release) // after the worker stopped: goleak then sees the handler end

	b.publish(t, "stuck", `{}`)
	select {
	case <-started:
	case <-time.After(waitLong):
		t.Fatal("the call never started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = w.Stop(ctx) // the drain ends with the call still running
	select {
	case <-w.Stopped():
	case <-time.After(waitLong):
		t.Fatal("Stopped not closed while an abandoned handler was stuck")
	}
}
