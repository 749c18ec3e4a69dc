package approval_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/jetstream"
)

// shortWindow is the window of the replicas that see an approval spent:
// the tests wait it out (a condition on time passing, not a timing
// assertion); the replicas with a window of an hour see the same records
// within theirs.
const shortWindow = 1500 * time.Millisecond

// sleepPast sleeps until the server's clock (this machine's: the server
// is embedded) is past t.
func sleepPast(t time.Time) {
	time.Sleep(time.Until(t) + 200*time.Millisecond)
}

// heldAndApproved holds c on r and approves it as by (via the CLI, with
// a reason), and returns the approval id.
func heldAndApproved(t *testing.T, r *replica, c *policy.Call, by string) string {
	t.Helper()
	ctx := ctxFor(t)
	d, err := r.s.Hold(ctx, c)
	if err != nil || d.State != policy.Pending {
		t.Fatalf("Hold = %+v, %v", d, err)
	}
	if _, err := r.s.Decide(ctx, d.ID, true, by, "ticket 7", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	return d.ID
}

// get is the record id as r reads it.
func get(t *testing.T, r *replica, id string) approval.Record {
	t.Helper()
	rec, err := r.s.Get(ctxFor(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// An approval is for one run. The first Use writes used_at; a Use, or a
// Hold, within the window (the same call sent again) is Approved without
// a write. After the window, Use finds the approval spent: the call is
// held again (pending, a new request time and deadline, the old approval
// in Previous). Approved again, it is good for one more use; a Hold after
// that one's window holds it again, with both approvals in Previous.
func TestUseIsForOneRun(t *testing.T) {
	srv := natstest.Start(t)
	long := startKeeping(t, srv, time.Hour)
	short := startKeeping(t, srv, shortWindow)
	ctx := ctxFor(t)
	c := call(`{"target": "prod"}`, 30*time.Minute)
	id := heldAndApproved(t, long, c, "alice")
	decided := get(t, long, id)

	d, err := long.s.Use(ctx, c, id)
	if err != nil || d.State != policy.Approved || d.By != "alice" || d.ID != id {
		t.Fatalf("first Use = %+v, %v; want Approved by alice", d, err)
	}
	used := get(t, short, id)
	if used.State != approval.StateApproved || used.UsedAt.IsZero() || used.Revision != decided.Revision+1 || used.Written.IsZero() {
		t.Fatalf("after the first Use: %+v; want approved, used_at written once", used)
	}
	if !strings.Contains(long.log.String(), `"msg":"approved call let through"`) {
		t.Fatalf("no audit line for the use:\n%s", long.log.String())
	}

	// Within the window (an hour's; on another replica too): Approved,
	// nothing written.
	other := startKeeping(t, srv, time.Hour)
	for _, r := range []*replica{long, long, other} {
		if d, err := r.s.Use(ctx, c, id); err != nil || d.State != policy.Approved {
			t.Fatalf("Use within the window = %+v, %v", d, err)
		}
	}
	if d, err := long.s.Hold(ctx, c); err != nil || d.State != policy.Approved {
		t.Fatalf("Hold within the window = %+v, %v", d, err)
	}
	if again := get(t, long, id); again.Revision != used.Revision || !again.UsedAt.Equal(used.UsedAt) {
		t.Fatalf("a use within the window was written: revision %d, want %d", again.Revision, used.Revision)
	}

	// After the window: spent, held again.
	sleepPast(used.Written.Add(shortWindow))
	c2 := *c
	c2.Key = "another-key"
	d, err = short.s.Use(ctx, &c2, id)
	if err != nil || d.State != policy.Pending || d.ID != id {
		t.Fatalf("Use after the window = %+v, %v; want Pending", d, err)
	}
	rec := get(t, long, id)
	if rec.State != approval.StatePending || rec.DecidedBy != "" || !rec.DecidedAt.IsZero() || rec.Reason != "" || rec.Via != "" ||
		!rec.UsedAt.IsZero() || !rec.CreatedAt.After(decided.CreatedAt) || rec.Timeout != 30*time.Minute || rec.KeyName != "another-key" {
		t.Fatalf("held again: %+v", rec)
	}
	if len(rec.Previous) != 1 {
		t.Fatalf("Previous = %+v, want the spent approval", rec.Previous)
	}
	if p := rec.Previous[0]; p.ApprovedBy != "alice" || p.Via != approval.ViaCLI || p.Reason != "ticket 7" || !p.UsedAt.Equal(used.UsedAt) ||
		!p.HeldAt.Equal(decided.CreatedAt) || !p.ApprovedAt.Equal(decided.DecidedAt) {
		t.Fatalf("Previous[0] = %+v; want alice's approval and its use", p)
	}
	if short.m.held.Load() != 1 || !strings.Contains(short.log.String(), `"msg":"call held for approval again"`) {
		t.Fatalf("held again: counted %d, log:\n%s", short.m.held.Load(), short.log.String())
	}
	// Pending now, on every replica, until decided: Use writes nothing.
	for _, r := range []*replica{long, short} {
		if d, err := r.s.Use(ctx, c, id); err != nil || d.State != policy.Pending {
			t.Fatalf("Use of the held-again call = %+v, %v", d, err)
		}
		if d, err := r.s.Hold(ctx, c); err != nil || d.State != policy.Pending {
			t.Fatalf("Hold of the held-again call = %+v, %v", d, err)
		}
	}
	if again := get(t, long, id); again.Revision != rec.Revision {
		t.Fatalf("the pending record was written again: revision %d, want %d", again.Revision, rec.Revision)
	}
	natstest.Eventually(t, waitLong, "the watch to see the call pending again", func() bool {
		return approval.PendingSeen(long.s) == 1 && approval.PendingSeen(short.s) == 1
	})

	// Approved again (the decide path of the CLI, the console and MCP
	// hosts): one more use.
	redecided, err := short.s.Decide(ctx, id, true, "bob", "", approval.ViaConsole)
	if err != nil || redecided.State != approval.StateApproved || len(redecided.Previous) != 1 {
		t.Fatalf("approving the held-again call: %+v, %v", redecided, err)
	}
	for range 3 {
		if d, err := long.s.Use(ctx, c, id); err != nil || d.State != policy.Approved || d.By != "bob" {
			t.Fatalf("Use after the second approval = %+v, %v", d, err)
		}
	}
	used2 := get(t, long, id)
	if used2.UsedAt.IsZero() || used2.Revision != redecided.Revision+1 {
		t.Fatalf("the second approval's use: %+v; want one write (revision %d)", used2, redecided.Revision+1)
	}

	// A Hold after that window holds it again too.
	sleepPast(used2.Written.Add(shortWindow))
	if d, err := short.s.Hold(ctx, c); err != nil || d.State != policy.Pending {
		t.Fatalf("Hold after the second window = %+v, %v", d, err)
	}
	rec = get(t, long, id)
	if rec.State != approval.StatePending || len(rec.Previous) != 2 || rec.Previous[0].ApprovedBy != "alice" ||
		rec.Previous[1].ApprovedBy != "bob" || !rec.Previous[1].UsedAt.Equal(used2.UsedAt) {
		t.Fatalf("held again by Hold: %+v", rec)
	}
	if short.m.held.Load() != 2 {
		t.Fatalf("held again counted %d times, want 2", short.m.held.Load())
	}
	// Denied now: Use says so, and writes nothing; Previous is kept.
	if _, err := long.s.Decide(ctx, id, false, "carol", "enough", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	if d, err := long.s.Use(ctx, c, id); err != nil || d.State != policy.Denied || d.By != "carol" {
		t.Fatalf("Use of a denied approval = %+v, %v", d, err)
	}
	if rec := get(t, long, id); rec.State != approval.StateDenied || len(rec.Previous) != 2 || !rec.UsedAt.IsZero() {
		t.Fatalf("denied: %+v", rec)
	}
}

// Use of an approval not approved writes nothing: pending, denied and
// timed out are returned as they are.
func TestUseOfUndecidedAndRefused(t *testing.T) {
	srv := natstest.Start(t)
	a := startKeeping(t, srv, shortWindow)
	ctx := ctxFor(t)

	pending := call(`{"n": 1}`, time.Hour)
	d, err := a.s.Hold(ctx, pending)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.s.Use(ctx, pending, d.ID); err != nil || got.State != policy.Pending {
		t.Fatalf("Use of a pending approval = %+v, %v", got, err)
	}

	denied := call(`{"n": 2}`, time.Hour)
	dd, err := a.s.Hold(ctx, denied)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.s.Decide(ctx, dd.ID, false, "bob", "no", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	if got, err := a.s.Use(ctx, denied, dd.ID); err != nil || got.State != policy.Denied || got.Reason != "no" {
		t.Fatalf("Use of a denied approval = %+v, %v", got, err)
	}

	late := call(`{"n": 3}`, time.Second)
	dl, err := a.s.Hold(ctx, late)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitLong, "the approval to time out", func() bool {
		got, err := a.s.Use(ctx, late, dl.ID)
		return err == nil && got.State == policy.TimedOut
	})
	for _, id := range []string{d.ID, dd.ID, dl.ID} {
		if rec := get(t, a, id); !rec.UsedAt.IsZero() || len(rec.Previous) != 0 {
			t.Fatalf("%s: a use written on an approval not approved: %+v", id, rec)
		}
	}
	if _, err := a.s.Use(ctx, pending, "ap-0123456789abcdef0123"); err == nil {
		t.Fatal("Use of an approval that does not exist: no error")
	}
}

// Many Uses at once of one approved call, on two replicas: all Approved,
// one write. After the window, Uses and Holds at once: all Pending, the
// call held again once.
func TestUseConcurrent(t *testing.T) {
	srv := natstest.Start(t)
	reps := []*replica{startKeeping(t, srv, time.Hour), startKeeping(t, srv, time.Hour)}
	shorts := []*replica{startKeeping(t, srv, shortWindow), startKeeping(t, srv, shortWindow)}
	ctx := ctxFor(t)
	c := call(`{"race": true}`, time.Hour)
	id := heldAndApproved(t, reps[0], c, "alice")
	decided := get(t, reps[0], id)

	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		r := reps[i%2]
		wg.Go(func() {
			if d, err := r.s.Use(ctx, c, id); err != nil || d.State != policy.Approved {
				t.Errorf("Use %d = %+v, %v; want Approved", i, d, err)
			}
		})
	}
	wg.Wait()
	used := get(t, reps[0], id)
	if used.UsedAt.IsZero() || used.Revision != decided.Revision+1 {
		t.Fatalf("after %d Uses at once: revision %d, want %d (one write); %+v", n, used.Revision, decided.Revision+1, used)
	}
	lines := strings.Count(reps[0].log.String(), "approved call let through") + strings.Count(reps[1].log.String(), "approved call let through")
	if lines != 1 {
		t.Fatalf("%d audit lines of the use, want 1", lines)
	}

	sleepPast(used.Written.Add(shortWindow))
	for i := range n {
		r := shorts[i%2]
		wg.Go(func() {
			var (
				d   policy.Decision
				err error
			)
			if i%4 < 2 {
				d, err = r.s.Use(ctx, c, id)
			} else {
				d, err = r.s.Hold(ctx, c)
			}
			if err != nil || d.State != policy.Pending {
				t.Errorf("call %d after the window = %+v, %v; want Pending", i, d, err)
			}
		})
	}
	wg.Wait()
	rec := get(t, reps[0], id)
	if rec.State != approval.StatePending || len(rec.Previous) != 1 || rec.Revision != used.Revision+1 {
		t.Fatalf("held again at once on two replicas: %+v; want one write", rec)
	}
	if held := shorts[0].m.held.Load() + shorts[1].m.held.Load(); held != 1 {
		t.Fatalf("held again counted %d times, want 1", held)
	}
}

// With Config.ResultsMaxAge zero, the window is TOOL_RESULTS' max age,
// read when a use is checked: the stream's setting changed is the new
// window; a stream that keeps results for good never spends an approval.
func TestUseWindowIsTheResultsMaxAge(t *testing.T) {
	srv := natstest.Start(t)
	ctx := ctxFor(t)
	a := startKeeping(t, srv, 0)
	results := js.StreamConfig{Name: jetstream.StreamResults, Subjects: []string{jetstream.ResultSubjectPrefix + ">"}, MaxAge: 0}
	if _, err := a.js.CreateStream(ctx, results); err != nil {
		t.Fatal(err)
	}
	c := call(`{"kept": "for good"}`, time.Hour)
	id := heldAndApproved(t, a, c, "alice")
	if d, err := a.s.Use(ctx, c, id); err != nil || d.State != policy.Approved {
		t.Fatalf("first Use = %+v, %v", d, err)
	}
	used := get(t, a, id)
	sleepPast(used.Written.Add(shortWindow))
	if d, err := a.s.Use(ctx, c, id); err != nil || d.State != policy.Approved {
		t.Fatalf("Use with results kept for good = %+v, %v; want Approved", d, err)
	}

	results.MaxAge, results.Duplicates = shortWindow, shortWindow
	if _, err := a.js.UpdateStream(ctx, results); err != nil {
		t.Fatal(err)
	}
	if d, err := a.s.Use(ctx, c, id); err != nil || d.State != policy.Pending {
		t.Fatalf("Use past TOOL_RESULTS' new max age = %+v, %v; want Pending", d, err)
	}
	if rec := get(t, a, id); rec.State != approval.StatePending || len(rec.Previous) != 1 {
		t.Fatalf("held again: %+v", rec)
	}
}

// The bucket a Store creates keeps three revisions of a record: its
// request, its decision and its use.
func TestBucketKeepsThreeRevisions(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, srv)
	ctx := ctxFor(t)
	kv, err := a.js.KeyValue(ctx, approval.BucketDefault)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.History() != 3 {
		t.Fatalf("bucket history = %v, %v; want 3", st, err)
	}
	c := call(`{"audit": 1}`, time.Hour)
	id := heldAndApproved(t, a, c, "alice")
	if _, err := a.s.Use(ctx, c, id); err != nil {
		t.Fatal(err)
	}
	h, err := kv.History(ctx, id)
	if err != nil || len(h) != 3 {
		t.Fatalf("history of the record: %d revisions, %v; want 3", len(h), err)
	}
}
