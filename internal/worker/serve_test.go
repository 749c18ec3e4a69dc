package worker_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/pkg/tools"
)

// A started worker serves a tool registered after Start once Serve binds
// it, and a tool it Unserves goes to the workers that still serve it: a
// call published after Unserve is answered by the other worker.
func TestServeAndUnserveAtRuntime(t *testing.T) {
	t.Parallel()
	b := setup(t, textTool("first", "one"))
	a := b.start(t, func(c *worker.Config) { c.WorkerID = "a" })

	if err := b.reg.Register(textTool("later", "two")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Serve(ctx, "later"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := a.Serve(ctx, "later", "first"); err != nil { // served already: nothing changes
		t.Fatalf("Serve again: %v", err)
	}
	if got := a.Serving(); !slices.Equal(got, []string{"first", "later"}) {
		t.Fatalf("Serving = %v", got)
	}
	if r := b.results.await(t, b.publish(t, "later", `{}`)); r.IsError || r.WorkerID != "a" {
		t.Fatalf("result %+v; want worker a's success", r)
	}
	if err := a.Serve(ctx, "missing"); err == nil {
		t.Error("Serve of a tool the registry does not hold succeeded")
	}

	if err := a.Unserve(ctx, "later", "never-served"); err != nil {
		t.Fatalf("Unserve: %v", err)
	}
	if got := a.Serving(); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("Serving after Unserve = %v", got)
	}
	id := b.publish(t, "later", `{}`)
	bw := b.start(t, func(c *worker.Config) { c.WorkerID = "b"; c.Tools = []string{"later"} })
	if r := b.results.await(t, id); r.IsError || r.WorkerID != "b" {
		t.Fatalf("result %+v; want worker b's success: a no longer serves the tool", r)
	}
	// a still serves its other tool, and serves the tool again on asking.
	if r := b.results.await(t, b.publish(t, "first", `{}`)); r.IsError || r.WorkerID != "a" {
		t.Fatalf("result %+v; want worker a's success", r)
	}
	if err := bw.Unserve(ctx, "later"); err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(ctx, "later"); err != nil {
		t.Fatalf("Serve again after Unserve: %v", err)
	}
	if r := b.results.await(t, b.publish(t, "later", `{}`)); r.IsError || r.WorkerID != "a" {
		t.Fatalf("result %+v; want worker a's success", r)
	}
	stopCtx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if err := a.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(ctx, "later"); err == nil {
		t.Error("Serve after Stop succeeded")
	}
}

// A call of a tool the worker Unserves while the call waits there for a
// slot (the worker's slots are held by another tool's call) goes back to
// JetStream at once, and a worker that still serves the tool answers it.
func TestUnserveHandsBackQueuedCalls(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	hold := tool("hold", func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return tools.Text("released"), nil
	})
	b := setup(t, hold, textTool("x", "from x"))
	rec := newRecorder()
	a := b.start(t, func(c *worker.Config) { c.WorkerID, c.Concurrency, c.Metrics = "a", 1, rec })
	defer close(release)

	holdID := b.publish(t, "hold", `{}`)
	<-started
	id := b.publish(t, "x", `{}`) // x's pull, open since Start, brings it: it queues for the slot hold holds
	deadline := time.Now().Add(waitLong)
	for rec.queuedNow("x") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the call of x did not queue for a slot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.Unserve(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	b.start(t, func(c *worker.Config) { c.WorkerID, c.Tools = "b", []string{"x"} })
	if r := b.results.await(t, id); r.IsError || r.WorkerID != "b" {
		t.Fatalf("result %+v; want worker b's success", r)
	}
	// Without the hand-back, a would keep the call alive (in-progress
	// acks) for as long as hold holds the slot: b could not have it.
	if n := rec.queuedNow("x"); n != 0 {
		t.Errorf("%d calls of x still queued on a", n)
	}
	release <- struct{}{}
	if r := b.results.await(t, holdID); r.IsError {
		t.Fatalf("hold: %+v", r)
	}
}
