package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// An approval is for one run: the approved call goes to the dispatcher and
// its use is recorded; sent again while the run's result is kept, it goes
// to the dispatcher again without a second use (the dispatcher answers it
// from the result; this fake dispatcher has no memory, so it counts a
// second turn); sent again after that, it is held again and not
// dispatched, until it is approved again — for one more run.
func TestGateApprovalIsForOneRun(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 0)
	ctx := acme(t.Context())
	turn := []envelope.ToolUseBlock{use("d1", "deploy", `{"env":"prod"}`)}
	p.a.decide("ap-d1", Decision{State: Approved, By: "alice"})

	got, err := p.g.Dispatch(ctx, "s", turn)
	if err != nil || got[0].IsError || p.next.count("deploy") != 1 {
		t.Fatalf("approved: %+v %v, ran %d", got, err, p.next.count("deploy"))
	}
	if uses, again := p.a.counts("ap-d1"); uses != 1 || again != 0 {
		t.Fatalf("after the run: %d uses, held again %d times; want 1 and 0", uses, again)
	}

	// Sent again within the window: to the dispatcher, the use not
	// recorded twice.
	p.a.advance(59 * time.Minute)
	got, err = p.g.Dispatch(ctx, "s", turn)
	if err != nil || got[0].IsError || p.next.turns.Load() != 2 {
		t.Fatalf("sent again within the window: %+v %v, %d turns dispatched", got, err, p.next.turns.Load())
	}
	if uses, again := p.a.counts("ap-d1"); uses != 1 || again != 0 {
		t.Fatalf("within the window: %d uses, held again %d times; want 1 and 0", uses, again)
	}

	// After the window: held again, not dispatched.
	p.a.advance(2 * time.Minute)
	var rep Report
	got, err = p.g.Dispatch(WithReport(WithoutApprovalWait(ctx), &rep), "s", turn)
	if err != nil || got[0].Code != classify.CodeApprovalPending || !got[0].Retryable || rep.Approvals[0] != "ap-d1" {
		t.Fatalf("sent again after the window: %+v %v %v; want approval_pending", got, err, rep.Approvals)
	}
	if p.next.turns.Load() != 2 {
		t.Fatalf("a spent approval's call was dispatched: %d turns", p.next.turns.Load())
	}
	if uses, again := p.a.counts("ap-d1"); uses != 1 || again != 1 {
		t.Fatalf("after the window: %d uses, held again %d times; want 1 and 1", uses, again)
	}

	// Approved again: one more run.
	p.a.decide("ap-d1", Decision{State: Approved, By: "bob"})
	got, err = p.g.Dispatch(ctx, "s", turn)
	if err != nil || got[0].IsError || p.next.count("deploy") != 3 {
		t.Fatalf("approved again: %+v %v, ran %d", got, err, p.next.count("deploy"))
	}
	if uses, again := p.a.counts("ap-d1"); uses != 2 || again != 1 {
		t.Fatalf("approved again: %d uses, held again %d times; want 2 and 1", uses, again)
	}
}

// The approval is spent between the Hold that found it good and its Use
// (the window ended in between, or another replica held the call again):
// the call is answered approval_pending, not dispatched, and its budget's
// charge is given back. A Use that fails answers the call unavailable,
// not run, its charge given back too.
func TestGateApprovalSpentBeforeItsUse(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 10)
	ctx := acme(t.Context())
	turn := []envelope.ToolUseBlock{use("d1", "deploy", `{}`), use("p1", "plain", `{}`)}
	p.a.decide("ap-d1", Decision{State: Approved, By: "alice"})
	if got, err := p.g.Dispatch(ctx, "s", turn); err != nil || got[0].IsError || got[1].IsError {
		t.Fatalf("approved: %+v %v", got, err)
	}
	if p.b.spent != 2 {
		t.Fatalf("spent %d, want 2", p.b.spent)
	}

	// 2 turns so far: the approved call goes on apart from the others.
	turns := p.next.turns.Load()
	// The window ends between the Hold and the Use.
	p.a.onUse = func() { p.a.now = p.a.now.Add(2 * time.Hour) }
	got, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("d1", "deploy", `{}`)})
	if err != nil || got[0].Code != classify.CodeApprovalPending || !got[0].Retryable {
		t.Fatalf("spent before its use: %+v %v; want approval_pending", got, err)
	}
	if p.next.count("deploy") != 1 || p.next.turns.Load() != turns {
		t.Fatalf("a spent approval's call ran: deploy %d, %d turns", p.next.count("deploy"), p.next.turns.Load())
	}
	if p.b.spent != 2 || p.b.refunds != 1 {
		t.Fatalf("spent %d after %d refunds; want the charge given back (2 after 1)", p.b.spent, p.b.refunds)
	}
	if _, again := p.a.counts("ap-d1"); again != 1 {
		t.Fatalf("held again %d times, want 1", again)
	}

	// The use cannot be recorded: unavailable, not run, given back; the
	// other calls of the turn run.
	p.a.onUse = nil
	p.a.decide("ap-d1", Decision{State: Approved, By: "bob"})
	p.a.useErr = errors.New("nats: timeout")
	got, err = p.g.Dispatch(ctx, "s", turn)
	if err != nil || got[0].Code != classify.CodeUnavailable || !got[0].Retryable || got[1].IsError {
		t.Fatalf("use not recorded: %+v %v", got, err)
	}
	if p.next.count("deploy") != 1 || p.next.count("plain") != 2 {
		t.Fatalf("ran deploy %d, plain %d; want 1 and 2", p.next.count("deploy"), p.next.count("plain"))
	}
	if p.b.spent != 3 || p.b.refunds != 2 {
		t.Fatalf("spent %d after %d refunds; want 3 after 2", p.b.spent, p.b.refunds)
	}
}

// A call a budget refuses does not use its approval: approved once, it
// runs when sent again with room in the budget.
func TestGateBudgetRefusalKeepsTheApproval(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 1)
	ctx := acme(t.Context())
	if got, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("p1", "plain", `{}`)}); err != nil || got[0].IsError {
		t.Fatalf("plain: %+v %v", got, err)
	}
	p.a.decide("ap-d1", Decision{State: Approved, By: "alice"})
	_, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("d1", "deploy", `{}`)})
	if ex, ok := errors.AsType[*ExhaustedError](err); !ok || ex.Results[0].Code != classify.CodeBudgetExhausted {
		t.Fatalf("over budget: %v", err)
	}
	if uses, _ := p.a.counts("ap-d1"); uses != 0 {
		t.Fatalf("a call the budget refused used its approval (%d uses)", uses)
	}
	p.b.mu.Lock()
	p.b.limit = 2
	p.b.mu.Unlock()
	if got, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("d1", "deploy", `{}`)}); err != nil || got[0].IsError || p.next.count("deploy") != 1 {
		t.Fatalf("with room: %+v %v", got, err)
	}
	if uses, _ := p.a.counts("ap-d1"); uses != 1 {
		t.Fatalf("%d uses, want 1", uses)
	}
}
