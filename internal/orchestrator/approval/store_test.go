package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
)

// A call held on one replica and decided on another: the Wait on the
// first wakes with the decision, who made it and why; a second decision
// is refused and names the first decider; the audit line is written by
// the deciding process.
func TestDecidedOnAnotherReplica(t *testing.T) {
	srv := natstest.Start(t)
	a, b := start(t, srv), start(t, srv)
	ctx := ctxFor(t)

	for _, approve := range []bool{true, false} {
		c := call(`{"target": {"host": "db.prod.example"}, "force": true}`, time.Hour)
		d, err := a.s.Hold(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if d.State != policy.Pending || d.ID != approval.ID(c.Tenant, c.Session, c.ID, c.Tool, c.Input) {
			t.Fatalf("Hold = %+v, want pending under the call's id", d)
		}
		waited := waitAsync(ctx, a.s, d.ID)
		natstest.Eventually(t, waitLong, "the Wait to register", func() bool { return approval.Waiters(a.s) == 1 })

		rec, err := b.s.Decide(ctx, d.ID, approve, "alice", "change ticket 42", approval.ViaCLI)
		if err != nil {
			t.Fatal(err)
		}
		want, wantState := policy.Approved, approval.StateApproved
		if !approve {
			want, wantState = policy.Denied, approval.StateDenied
		}
		if rec.State != wantState || rec.DecidedBy != "alice" || rec.Via != approval.ViaCLI {
			t.Fatalf("Decide = %+v", rec)
		}
		got := await(t, waited)
		if got.err != nil || got.d.State != want || got.d.By != "alice" || got.d.Reason != "change ticket 42" || got.d.ID != d.ID {
			t.Fatalf("Wait = %+v, %v; want %v by alice with the reason", got.d, got.err, want)
		}

		_, err = a.s.Decide(ctx, d.ID, !approve, "bob", "", approval.ViaConsole)
		var de *approval.DecidedError
		if !errors.As(err, &de) || !errors.Is(err, approval.ErrAlreadyDecided) || errors.Is(err, approval.ErrTimedOut) {
			t.Fatalf("second Decide: %v, want a DecidedError", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "already "+string(wantState)+" by alice at ") || !strings.Contains(msg, "via cli") {
			t.Fatalf("second Decide's error %q does not name the first decision", msg)
		}
		if de.Record.DecidedBy != "alice" {
			t.Fatalf("DecidedError.Record = %+v", de.Record)
		}

		// The same call sent again gets the decision at once.
		again, err := b.s.Hold(ctx, c)
		if err != nil || again.State != want || again.By != "alice" {
			t.Fatalf("Hold again = %+v, %v", again, err)
		}
	}
	if n := b.m.decidedOf(approval.StateApproved) + b.m.decidedOf(approval.StateDenied); n != 2 {
		t.Fatalf("b counted %d decisions, want 2", n)
	}
	if n := a.m.decidedOf(approval.StateApproved) + a.m.decidedOf(approval.StateDenied); n != 0 {
		t.Fatalf("a counted %d decisions, want none (it decided none)", n)
	}
	if a.m.held.Load() != 2 || b.m.held.Load() != 0 {
		t.Fatalf("held: a %d, b %d; want 2 and 0", a.m.held.Load(), b.m.held.Load())
	}
	logs := b.log.String()
	for _, want := range []string{`"msg":"approval decided"`, `"decision":"approved"`, `"decision":"denied"`, `"by":"alice"`,
		`"via":"cli"`, `"reason":"change ticket 42"`, `"tool":"deploy"`, `"tenant":"acme"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the decider's log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(a.log.String(), "approval decided") {
		t.Errorf("the replica that decided nothing logged a decision:\n%s", a.log.String())
	}
	natstest.Eventually(t, waitLong, "no pending approval left in the gauge", func() bool { return a.m.pending.Load() == 0 })
}

// Nobody decides: the Wait returns TimedOut at the deadline, the record is
// written timed_out, and a decision after it is refused.
func TestTimeout(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, srv)
	ctx := ctxFor(t)
	c := call(`{"path": "/etc/passwd"}`, time.Second)
	d, err := a.s.Hold(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	got := await(t, waitAsync(ctx, a.s, d.ID))
	if got.err != nil || got.d.State != policy.TimedOut || got.d.Waited < time.Second {
		t.Fatalf("Wait = %+v, %v; want TimedOut after at least 1s", got.d, got.err)
	}
	r := open(t, srv)
	rec, err := r.s.Get(ctx, d.ID)
	if err != nil || rec.State != approval.StateTimedOut || rec.DecidedBy != "" {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
	_, err = r.s.Decide(ctx, d.ID, true, "alice", "", approval.ViaCLI)
	if !errors.Is(err, approval.ErrTimedOut) || !strings.Contains(err.Error(), "timed out at") || !strings.Contains(err.Error(), "no decision within 1s") {
		t.Fatalf("Decide after the timeout: %v", err)
	}
	if n := a.m.decidedOf(approval.StateTimedOut); n != 1 {
		t.Fatalf("timeouts counted: %d, want 1", n)
	}
	if !strings.Contains(a.log.String(), `"msg":"approval timed out"`) {
		t.Fatalf("no audit line for the timeout:\n%s", a.log.String())
	}
	again, err := a.s.Hold(ctx, c)
	if err != nil || again.State != policy.TimedOut {
		t.Fatalf("the same call sent again: %+v, %v; want TimedOut", again, err)
	}
}

// A pending record nobody waits on is written timed_out by a started
// replica's sweep once its deadline passes.
func TestSweepWritesTimeout(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, srv)
	ctx := ctxFor(t)
	d, err := a.s.Hold(ctx, call(`{"path": "/etc/hosts"}`, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitLong, "the sweep to write the timeout", func() bool {
		var rec approval.Record
		natstest.WithJS(srv.ClientURL(), func(ctx context.Context, j js.JetStream) {
			kv, err := j.KeyValue(ctx, approval.BucketDefault)
			if err != nil {
				return
			}
			e, err := kv.Get(ctx, d.ID)
			if err == nil {
				_ = json.Unmarshal(e.Value(), &rec)
			}
		})
		return rec.State == approval.StateTimedOut
	})
	natstest.Eventually(t, waitLong, "the gauge to drop to 0", func() bool { return a.m.pending.Load() == 0 })
}

// The same call held twice, at once on two replicas, is one record.
func TestHeldTwiceIsOneRecord(t *testing.T) {
	srv := natstest.Start(t)
	a, b := start(t, srv), start(t, srv)
	ctx := ctxFor(t)
	c := call(`{"path": "/etc/shadow"}`, time.Hour)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		s := a.s
		if i%2 == 1 {
			s = b.s
		}
		wg.Go(func() {
			d, err := s.Hold(ctx, c)
			if err != nil || d.State != policy.Pending {
				t.Errorf("Hold = %+v, %v", d, err)
			}
			ids[i] = d.ID
		})
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("ids %v differ", ids)
		}
	}
	if n := a.m.held.Load() + b.m.held.Load(); n != 1 {
		t.Fatalf("held counted %d times, want 1", n)
	}
	list, err := b.s.List(ctx, true)
	if err != nil || len(list) != 1 || list[0].ID != ids[0] {
		t.Fatalf("List = %+v, %v; want the one record", list, err)
	}
	rec := list[0]
	if rec.Tool != "deploy" || rec.Tenant != "acme" || rec.Session != "sess-1" || rec.CallID != c.ID || rec.KeyName != "ci-bot" ||
		string(rec.Input) != `{"path":"/etc/shadow"}` || rec.Binding != approval.Binding("acme", "deploy", c.Input) || rec.Timeout != time.Hour {
		t.Fatalf("record = %+v", rec)
	}
	natstest.Eventually(t, waitLong, "both replicas to see one pending", func() bool {
		return approval.PendingSeen(a.s) == 1 && approval.PendingSeen(b.s) == 1 && a.m.pending.Load() == 1
	})

	// Another tenant's identical call is another approval.
	other := *c
	other.Tenant = "globex"
	d, err := a.s.Hold(ctx, &other)
	if err != nil || d.ID == ids[0] {
		t.Fatalf("another tenant's call: %+v, %v; want a new approval", d, err)
	}
}

// A restart: the replica that held the call stops; a new one on the same
// server sees the record pending, and a decision made then (by a command)
// reaches its Wait.
func TestRestart(t *testing.T) {
	srv := natstest.Start(t)
	ctx := ctxFor(t)
	old := start(t, srv)
	c := call(`{"path": "/etc/fstab"}`, time.Hour)
	d, err := old.s.Hold(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	w := waitAsync(ctx, old.s, d.ID)
	natstest.Eventually(t, waitLong, "the Wait to register", func() bool { return approval.Waiters(old.s) == 1 })
	if err := old.s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := await(t, w); !errors.Is(got.err, approval.ErrStopped) || got.d.State != policy.Pending {
		t.Fatalf("Wait on a stopping store = %+v, %v", got.d, got.err)
	}

	fresh := start(t, srv)
	again, err := fresh.s.Hold(ctx, c)
	if err != nil || again.ID != d.ID || again.State != policy.Pending {
		t.Fatalf("Hold after the restart = %+v, %v", again, err)
	}
	if fresh.m.held.Load() != 0 {
		t.Fatal("the restarted replica counted the call as newly held")
	}
	w = waitAsync(ctx, fresh.s, d.ID)
	natstest.Eventually(t, waitLong, "the Wait to register", func() bool { return approval.Waiters(fresh.s) == 1 })
	cmd := open(t, srv)
	if _, err := cmd.s.Decide(ctx, d.ID, true, "carol", "", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	if got := await(t, w); got.err != nil || got.d.State != policy.Approved || got.d.By != "carol" {
		t.Fatalf("Wait after the restart = %+v, %v", got.d, got.err)
	}
	if _, err := cmd.s.Wait(ctx, d.ID); !errors.Is(err, approval.ErrNotWatching) {
		t.Fatalf("Wait on an opened store: %v", err)
	}
}

// A Wait whose ctx ends returns Pending and the ctx's error; the record
// stays pending.
func TestWaitCtxEnds(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, srv)
	ctx := ctxFor(t)
	d, err := a.s.Hold(ctx, call(`{"path": "/etc/motd"}`, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithCancel(ctx)
	w := waitAsync(short, a.s, d.ID)
	natstest.Eventually(t, waitLong, "the Wait to register", func() bool { return approval.Waiters(a.s) == 1 })
	cancel()
	got := await(t, w)
	if !errors.Is(got.err, context.Canceled) || got.d.State != policy.Pending || got.d.ID != d.ID {
		t.Fatalf("Wait = %+v, %v", got.d, got.err)
	}
	if approval.Waiters(a.s) != 0 {
		t.Fatal("the Wait left its waiter behind")
	}
	rec, err := a.s.Get(ctx, d.ID)
	if err != nil || rec.State != approval.StatePending {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
}

// Deciders racing on two replicas: exactly one decision stands, and every
// other decider is told whose.
func TestConcurrentDecisions(t *testing.T) {
	srv := natstest.Start(t)
	a, b := start(t, srv), start(t, srv)
	ctx := ctxFor(t)
	d, err := a.s.Hold(ctx, call(`{"path": "/etc/race"}`, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	type outcome struct {
		by  string
		rec approval.Record
		err error
	}
	outs := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		s := a.s
		if i%2 == 1 {
			s = b.s
		}
		wg.Go(func() {
			by := fmt.Sprintf("person-%d", i)
			rec, err := s.Decide(ctx, d.ID, i%3 == 0, by, "", approval.ViaConsole)
			outs[i] = outcome{by, rec, err}
		})
	}
	wg.Wait()
	var winner string
	for _, o := range outs {
		if o.err == nil {
			if winner != "" {
				t.Fatalf("two decisions stood: %s and %s", winner, o.by)
			}
			winner = o.by
		}
	}
	if winner == "" {
		t.Fatalf("no decision stood: %+v", outs)
	}
	for _, o := range outs {
		if o.err != nil && (!errors.Is(o.err, approval.ErrAlreadyDecided) || !strings.Contains(o.err.Error(), " by "+winner+" at ")) {
			t.Errorf("%s: %v; want the decision of %s named", o.by, o.err, winner)
		}
	}
	rec, err := b.s.Get(ctx, d.ID)
	if err != nil || rec.DecidedBy != winner {
		t.Fatalf("Get = %+v, %v; want %s's decision", rec, err, winner)
	}
	if got := a.m.decidedOf(approval.StateApproved) + a.m.decidedOf(approval.StateDenied) +
		b.m.decidedOf(approval.StateApproved) + b.m.decidedOf(approval.StateDenied); got != 1 {
		t.Fatalf("decisions counted: %d, want 1", got)
	}
}
