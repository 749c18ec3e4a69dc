package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A task started on A is answered by B, and only for its tenant.
func TestStartOnAGetOnB(t *testing.T) {
	f := newFleet(t)
	a, b := f.replica("a"), f.replica("b")
	ctx := bg(t)
	task, err := a.store.Start(ctx, tasks.Request{Tenant: "acme", Session: "s", Calls: calls("gate", "ab", 1)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if len(task.ID) != 22 || task.State != tasks.StateWorking || task.PollInterval <= 0 || task.TTL != tasks.RetentionDefault {
		t.Fatalf("Start: %+v", task)
	}
	f.started()
	got, err := b.store.Get(ctx, "acme", task.ID)
	if err != nil || got.State != tasks.StateWorking {
		t.Fatalf("Get on B while running: %+v, %v", got.State, err)
	}
	for _, tenant := range []string{"other", ""} {
		if _, err := b.store.Get(ctx, tenant, task.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("Get as tenant %q: %v, want ErrNotFound", tenant, err)
		}
		if _, err := b.store.Cancel(ctx, tenant, task.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("Cancel as tenant %q: %v, want ErrNotFound", tenant, err)
		}
	}
	// A short wait on a working task returns it working, no error.
	got, err = b.store.Wait(ctx, "acme", task.ID, 50*time.Millisecond)
	if err != nil || got.State != tasks.StateWorking {
		t.Fatalf("Wait 50ms: %v, %v", got.State, err)
	}
	if n := tasks.Waiters(b.store); n != 0 {
		t.Fatalf("%d waiters left after a Wait that timed out", n)
	}
	f.gate.release()
	done := waitFinal(t, b.store, "acme", task.ID)
	if done.State != tasks.StateCompleted || len(done.Results) != 1 || done.Results[0].IsError ||
		done.Results[0].Content[0].Text != "done ab-0" {
		t.Fatalf("done: %+v", done)
	}
	if n := f.gate.runsOf("ab-0"); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
}

// Ids that were never issued, or could not be ids, are not found.
func TestUnknownIDs(t *testing.T) {
	f := newFleet(t)
	a := f.replica("a")
	ctx := bg(t)
	for _, id := range []string{"", "*", ">", "a.lease", "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAA*", strings.Repeat("x", 5000)} {
		if _, err := a.store.Get(ctx, "", id); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := a.store.Wait(ctx, "", id, time.Second); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Wait(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := a.store.Cancel(ctx, "", id); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Cancel(%q): %v, want ErrNotFound", id, err)
		}
	}
	// Waits on ids that do not exist leave nothing behind.
	for i := range 100 {
		id := fmt.Sprintf("%022d", i)
		if _, err := a.store.Wait(ctx, "", id, time.Second); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("Wait(%q): %v", id, err)
		}
	}
	if n := tasks.Waiters(a.store); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
	if _, err := a.store.Start(ctx, tasks.Request{}); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("Start without calls: %v, want ErrInvalid", err)
	}
}

// The owner is killed (its connection closed, no drain) while one call
// runs on a worker and the next is held in its memory: B adopts the task,
// and each call runs exactly once.
func TestAdoptionAfterHardKill(t *testing.T) {
	f := newFleet(t)
	a, b := f.replica("a"), f.replica("b")
	ctx := bg(t)
	task, err := a.store.Start(ctx, tasks.Request{Tenant: "acme", Session: "s", Calls: calls("gate", "kill", 2)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if id := f.started(); id != "kill-0" {
		t.Fatalf("first execution %s", id)
	}
	natstest.Eventually(t, 10*time.Second, "A holds the second call", func() bool {
		for _, ts := range a.orch.Dispatcher().SchedSnapshot().Tools {
			if ts.Tool == "gate" {
				return ts.InFlight == 1 && ts.Waiting == 1
			}
		}
		return false
	})
	a.nc.Close() // kill -9, as far as JetStream can tell
	// B adopts once the lease lapses; the running call's result comes
	// from its execution, the held one runs then.
	natstest.Eventually(t, 20*time.Second, "B adopts the task", func() bool {
		got, err := b.store.Get(ctx, "acme", task.ID)
		return err == nil && got.State == tasks.StateWorking && adoptedBy(b, task.ID)
	})
	f.gate.release()
	done := waitFinal(t, b.store, "acme", task.ID)
	if done.State != tasks.StateCompleted || len(done.Results) != 2 {
		t.Fatalf("done: %+v", done)
	}
	for i, r := range done.Results {
		if r.IsError || r.CallID != calls("gate", "kill", 2)[i].ID {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if done.Adoptions != 1 || done.Owner != "b" {
		t.Fatalf("owner %q after %d adoptions, want b after 1", done.Owner, done.Adoptions)
	}
	for _, id := range []string{"kill-0", "kill-1"} {
		if n := f.gate.runsOf(id); n != 1 {
			t.Fatalf("%s ran %d times, want once", id, n)
		}
	}
}

// adoptedBy reports whether r runs the task (its Wait learns of the
// adoption through the lease; the test asks the store).
func adoptedBy(r *replica, id string) bool { return tasks.Runs(r.store, id) }

// Cancel on B cancels the call running for A's task, pool-wide.
func TestCancelFromAnotherReplica(t *testing.T) {
	f := newFleet(t)
	a, b := f.replica("a"), f.replica("b")
	ctx := bg(t)
	task, err := a.store.Start(ctx, tasks.Request{Tenant: "acme", Calls: calls("gate", "cx", 1)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	f.started()
	got, err := b.store.Cancel(ctx, "acme", task.ID)
	if err != nil || got.State != tasks.StateCancelled {
		t.Fatalf("Cancel: %+v, %v", got.State, err)
	}
	natstest.Eventually(t, 20*time.Second, "the call is cancelled on its worker", func() bool {
		return f.gate.wasCancelled("cx-0")
	})
	done := waitFinal(t, a.store, "acme", task.ID)
	if done.State != tasks.StateCancelled || done.Error == "" {
		t.Fatalf("after cancel: %+v", done)
	}
	// A second cancel answers the task as it is.
	if again, err := b.store.Cancel(ctx, "acme", task.ID); err != nil || again.State != tasks.StateCancelled {
		t.Fatalf("second Cancel: %+v, %v", again.State, err)
	}
}

// A record is kept for its TTL after the task ended, then it is gone.
func TestRetentionExpiry(t *testing.T) {
	f := newFleet(t)
	a := f.replica("a")
	ctx := bg(t)
	f.gate.release()
	task, err := a.store.Start(ctx, tasks.Request{Calls: calls("gate", "ttl", 1), TTL: time.Second})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if task.TTL != time.Second {
		t.Fatalf("TTL %v", task.TTL)
	}
	if done := waitFinal(t, a.store, "", task.ID); done.State != tasks.StateCompleted {
		t.Fatalf("done: %+v", done)
	}
	natstest.Eventually(t, 20*time.Second, "the record expires", func() bool {
		_, err := a.store.Get(ctx, "", task.ID)
		return errors.Is(err, tasks.ErrNotFound)
	})
}

// A request over the record limit is refused at Start; results over it
// end the task as failed, with words that say what to do.
func TestRecordLimit(t *testing.T) {
	f := newFleet(t)
	a := f.replica("a", func(c *tasks.Config) { c.MaxRecordBytes = 64 << 10 })
	ctx := bg(t)
	big := calls("gate", "big", 1)
	big[0].Input = []byte(`{"x":"` + strings.Repeat("y", 70<<10) + `"}`)
	if _, err := a.store.Start(ctx, tasks.Request{Calls: big}); !errors.Is(err, tasks.ErrTooLarge) {
		t.Fatalf("Start of a large request: %v, want ErrTooLarge", err)
	}
	task, err := a.store.Start(ctx, tasks.Request{Calls: calls("big", "b", 1)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	done := waitFinal(t, a.store, "", task.ID)
	if done.State != tasks.StateFailed || !strings.Contains(done.Error, "synchronously") || done.Results != nil {
		t.Fatalf("done: %+v", done)
	}
}

// A replica that stops gracefully hands its working tasks over: another
// adopts them at once, and the call runs once.
func TestStopHandsOver(t *testing.T) {
	f := newFleet(t)
	// A's lease is long: B adopts because A handed the task over, not
	// because a lease lapsed.
	a, b := f.replica("a", func(c *tasks.Config) { c.Lease = time.Minute }), f.replica("b")
	ctx := bg(t)
	task, err := a.store.Start(ctx, tasks.Request{Tenant: "acme", Calls: calls("gate", "hand", 1)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	f.started()
	stopCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_ = a.store.Stop(stopCtx)
	if _, err := a.store.Start(ctx, tasks.Request{Calls: calls("gate", "late", 1)}); !errors.Is(err, tasks.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
	// The task's turn on A ended as at its deadline: A's dispatcher drains
	// at once (its call still runs, for B) and cancelled nothing.
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	if err := a.orch.Dispatcher().Stop(dctx); err != nil {
		t.Fatalf("A's dispatcher did not drain: %v", err)
	}
	natstest.Eventually(t, 20*time.Second, "B adopts the task handed over", func() bool { return adoptedBy(b, task.ID) })
	f.gate.release()
	done := waitFinal(t, b.store, "acme", task.ID)
	if done.State != tasks.StateCompleted || done.Owner != "b" {
		t.Fatalf("done: %+v", done)
	}
	if n := f.gate.runsOf("hand-0"); n != 1 || f.gate.wasCancelled("hand-0") {
		t.Fatalf("the call ran %d times (cancelled: %v)", n, f.gate.wasCancelled("hand-0"))
	}
}

// A turn the dispatcher refuses for saturation is not recorded: Start
// returns the *dispatch.SaturatedError, as a sync call gets a 429.
func TestStartSaturated(t *testing.T) {
	f := newFleet(t)
	a := f.replicaWith("a", func(c *dispatch.Config) { c.MaxCallsInFlight = 1 })
	ctx := bg(t)
	if _, err := a.store.Start(ctx, tasks.Request{Tenant: "acme", Calls: calls("gate", "one", 1)}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	f.started()
	_, err := a.store.Start(ctx, tasks.Request{Tenant: "acme", Calls: calls("gate", "two", 1)})
	if _, ok := errors.AsType[*dispatch.SaturatedError](err); !ok {
		t.Fatalf("second Start: %v, want a *dispatch.SaturatedError", err)
	}
	f.gate.release()
}
