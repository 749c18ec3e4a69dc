package policy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

func testCatalog() memCatalog {
	return memCatalog{
		"plain":  {Name: "plain"},
		"search": {Name: "search", Cache: &tools.CachePolicy{TTL: time.Minute}},
		"fail":   {Name: "fail", Cache: &tools.CachePolicy{TTL: time.Minute}},
		"world":  {Name: "world", Cache: &tools.CachePolicy{TTL: time.Minute, Scope: tools.CacheScopeGlobal}},
		"deploy": {Name: "deploy", Approval: &tools.ApprovalRule{}},
		"write": {Name: "write", Approval: &tools.ApprovalRule{When: []tools.ApprovalMatch{
			{Field: "input.path", Pattern: "/etc/**"}}}},
		"pricey": {Name: "pricey", Cost: 5},
		"read": {Name: "read", Cache: &tools.CachePolicy{TTL: time.Minute}, Approval: &tools.ApprovalRule{When: []tools.ApprovalMatch{
			{Field: "input.path", Pattern: "/secret/**"}}}},
	}
}

type gateParts struct {
	next *countingNext
	c    *memCache
	b    *memBudgets
	a    *memApprovals
	g    *Gate
}

func newGate(t *testing.T, next *countingNext, budgetLimit int64) gateParts {
	t.Helper()
	p := gateParts{next: next, c: newMemCache(), a: newMemApprovals()}
	cfg := Config{Next: next, Catalog: testCatalog(), Cache: p.c, Approvals: p.a}
	if budgetLimit > 0 {
		p.b = &memBudgets{tenant: "acme", limit: budgetLimit}
		cfg.Budgets = p.b
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.g = g
	return p
}

func use(id, tool, input string) envelope.ToolUseBlock {
	return envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: tool, Input: []byte(input)}
}

func acme(ctx context.Context) context.Context { return dispatch.WithTenant(ctx, "acme") }

func TestGateLeavesPlainTurnsAlone(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 0)
	calls := []envelope.ToolUseBlock{use("a", "plain", `{}`), use("b", "pricey", `{"x":1}`)}
	if p.g.applies(acme(t.Context()), calls) {
		t.Fatal("a turn of tools without cache or approval, and no budget, must go straight to the dispatcher")
	}
	got, err := p.g.Dispatch(acme(t.Context()), "s", calls)
	if err != nil || len(got) != 2 || got[0].CallID != "a" || p.next.turns.Load() != 1 {
		t.Fatalf("got %v, %v after %d turns", got, err, p.next.turns.Load())
	}
}

func TestGateCache(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 0)
	ctx := acme(t.Context())
	var rep Report
	got, err := p.g.Dispatch(WithReport(ctx, &rep), "s", []envelope.ToolUseBlock{use("a", "search", `{"q": "go", "n": 1}`), use("p", "plain", `{}`)})
	if err != nil || got[0].IsError || rep.Cache[0] != CacheMiss || rep.Cache[1] != CacheNone {
		t.Fatalf("first call: %+v %v, report %v", got, err, rep.Cache)
	}
	rep = Report{}
	got, err = p.g.Dispatch(WithReport(ctx, &rep), "other-session", []envelope.ToolUseBlock{use("b", "search", `{"q":"go","n":1}`)})
	if err != nil || got[0].CallID != "b" || !strings.Contains(got[0].Content.Text(), `ran search {"q": "go", "n": 1}`) || rep.Cache[0] != CacheHit {
		t.Fatalf("repeat: %+v %v, report %v", got, err, rep.Cache)
	}
	if n := p.next.count("search"); n != 1 {
		t.Fatalf("search ran %d times, want 1 (the repeat is a hit)", n)
	}
	// Another tenant does not share a tenant-scoped result; a global one does.
	if _, err := p.g.Dispatch(dispatch.WithTenant(t.Context(), "other"), "s", []envelope.ToolUseBlock{use("c", "search", `{"q":"go","n":1}`)}); err != nil || p.next.count("search") != 2 {
		t.Fatalf("another tenant: %v, ran %d", err, p.next.count("search"))
	}
	for _, tenant := range []string{"acme", "other"} {
		if _, err := p.g.Dispatch(dispatch.WithTenant(t.Context(), tenant), "s", []envelope.ToolUseBlock{use("w", "world", `{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.next.count("world"); n != 1 {
		t.Fatalf("a global-scope tool ran %d times for two tenants, want 1", n)
	}
	// Bypass runs again and replaces the entry.
	rep = Report{}
	if _, err := p.g.Dispatch(WithReport(WithNoCache(ctx), &rep), "s", []envelope.ToolUseBlock{use("d", "search", `{"q":"go","n":1}`)}); err != nil || rep.Cache[0] != CacheBypass || p.next.count("search") != 3 {
		t.Fatalf("bypass: %v, report %v, ran %d", err, rep.Cache, p.next.count("search"))
	}
	// A failure is not cached: the next call runs.
	for range 2 {
		got, _ := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("f", "fail", `{}`)})
		if !got[0].IsError {
			t.Fatal("fail must fail")
		}
	}
	if n := p.next.count("fail"); n != 2 {
		t.Fatalf("a failing cacheable call ran %d times in two turns, want 2", n)
	}
}

func TestGateCoalescesCallsInFlight(t *testing.T) {
	t.Parallel()
	next := &countingNext{release: make(chan struct{}), started: make(chan struct{}, 100)}
	p := newGate(t, next, 0)
	const n = 20
	var wg sync.WaitGroup
	results := make([]envelope.Result, n)
	reports := make([]Report, n)
	for i := range n {
		wg.Go(func() {
			ctx := WithReport(acme(t.Context()), &reports[i])
			got, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use(string(rune('a'+i)), "search", `{"q":"same"}`)})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = got[0]
		})
	}
	<-next.started
	natstest.Eventually(t, 5*time.Second, "the others wait on the claim", func() bool {
		p.c.mu.Lock()
		defer p.c.mu.Unlock()
		return p.c.claims[`search|acme|{"q":"same"}`]
	})
	close(next.release)
	wg.Wait()
	if ran := p.next.count("search"); ran != 1 {
		t.Fatalf("%d identical calls in flight ran the tool %d times, want 1", n, ran)
	}
	var coalesced int
	for i := range n {
		if results[i].CallID != string(rune('a'+i)) || results[i].IsError {
			t.Fatalf("call %d: %+v", i, results[i])
		}
		if reports[i].Cache[0] == CacheCoalesced || reports[i].Cache[0] == CacheHit {
			coalesced++
		}
	}
	if coalesced != n-1 {
		t.Fatalf("%d calls were coalesced or hits, want %d", coalesced, n-1)
	}
	// Twice in one turn: one run.
	got, err := p.g.Dispatch(acme(t.Context()), "s", []envelope.ToolUseBlock{use("x", "search", `{"q":"new"}`), use("y", "search", `{"q": "new"}`)})
	if err != nil || got[1].CallID != "y" || got[0].Content.Text() != got[1].Content.Text() || p.next.count("search") != 2 {
		t.Fatalf("twice in a turn: %+v %v, ran %d", got, err, p.next.count("search"))
	}
}

func TestGateBudgets(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 7)
	p.b.soft = 6
	ctx := acme(t.Context())
	got, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("a", "pricey", `{}`), use("b", "plain", `{}`)})
	if err != nil || got[0].IsError || got[1].IsError {
		t.Fatalf("within budget: %+v %v", got, err)
	}
	if text := got[1].Content.Text(); !strings.Contains(text, `Note: the budget "daily" has 1 call left of the 7 calls it allows per day`) {
		t.Fatalf("past the soft threshold, the result must say so: %q", text)
	}
	got, err = p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("c", "pricey", `{}`), use("d", "plain", `{}`)})
	if err != nil || !got[0].IsError || got[0].Code != classify.CodeBudgetExhausted || got[1].IsError {
		t.Fatalf("one over budget: %+v %v", got, err)
	}
	if !got[0].Retryable || got[0].RetryAfter != 3*time.Hour || !strings.Contains(got[0].Content.Text(), `the budget "daily" allows 7 calls per day`) {
		t.Fatalf("the refused call must name the budget and its reset: %+v", got[0])
	}
	_, err = p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("e", "plain", `{}`)})
	ex, ok := errors.AsType[*ExhaustedError](err)
	if !ok || ex.RetryAfter != 3*time.Hour || len(ex.Results) != 1 || ex.Results[0].Code != classify.CodeBudgetExhausted {
		t.Fatalf("a turn wholly over budget: %v", err)
	}
	if n := p.next.count("plain") + p.next.count("pricey"); n != 3 {
		t.Fatalf("%d calls ran, want 3", n)
	}
	// Another tenant has no budget.
	if got, err := p.g.Dispatch(t.Context(), "s", []envelope.ToolUseBlock{use("f", "plain", `{}`)}); err != nil || got[0].IsError {
		t.Fatalf("no budget: %+v %v", got, err)
	}
}

func TestGateRefundsWhenTheTurnFails(t *testing.T) {
	t.Parallel()
	next := &countingNext{err: &dispatch.SaturatedError{Load: 10, Limit: 10}}
	p := newGate(t, next, 5)
	_, err := p.g.Dispatch(acme(t.Context()), "s", []envelope.ToolUseBlock{use("a", "plain", `{}`), use("b", "plain", `{}`)})
	if _, ok := errors.AsType[*dispatch.SaturatedError](err); !ok {
		t.Fatalf("the dispatcher's error must come through: %v", err)
	}
	if p.b.spent != 0 || p.b.refunds != 2 {
		t.Fatalf("spent %d after %d refunds, want 0 after 2", p.b.spent, p.b.refunds)
	}
}

func TestGateApprovals(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 0)
	ctx := acme(t.Context())

	p.a.decide("ap-d1", Decision{State: Denied, By: "alice", Reason: "not on Fridays"})
	got, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("d1", "deploy", `{}`), use("w1", "write", `{"path":"/tmp/x"}`)})
	if err != nil || got[0].Code != classify.CodeNotApproved || !strings.Contains(got[0].Content.Text(), `"not on Fridays"`) || got[1].IsError {
		t.Fatalf("denied, and a call the rule does not name: %+v %v", got, err)
	}
	if p.next.count("deploy") != 0 || p.next.count("write") != 1 {
		t.Fatal("a denied call must not run; one the rule does not name runs")
	}

	// Waiting: the call runs when approved; a durable task's creator is
	// told the turn was taken while it waits.
	done := make(chan []envelope.Result)
	admitted := make(chan struct{})
	go func() {
		actx := dispatch.WithAdmitted(ctx, func() { close(admitted) })
		got, err := p.g.Dispatch(actx, "s", []envelope.ToolUseBlock{use("w2", "write", `{"path":"/etc/passwd"}`)})
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	natstest.Eventually(t, 5*time.Second, "the call is held", func() bool { return p.a.isHeld("ap-w2") })
	select {
	case <-admitted:
	case <-time.After(10 * time.Second):
		t.Fatal("a turn held for approval must signal its admission (a durable task's POST waits for it)")
	}
	p.a.decide("ap-w2", Decision{State: Approved, By: "bob"})
	if got := <-done; got[0].IsError || p.next.count("write") != 2 {
		t.Fatalf("approved: %+v", got)
	}

	// A timeout, and a request whose deadline comes first.
	p.a.decide("ap-d2", Decision{State: TimedOut, Waited: 15 * time.Minute})
	got, _ = p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("d2", "deploy", `{}`)})
	if got[0].Code != classify.CodeApprovalTimeout || !strings.Contains(got[0].Content.Text(), "no one decided within 15m") {
		t.Fatalf("timed out: %+v", got[0])
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	var rep Report
	got, err = p.g.Dispatch(WithReport(dctx, &rep), "s", []envelope.ToolUseBlock{use("d3", "deploy", `{}`)})
	if err != nil || got[0].Code != classify.CodeApprovalPending || !got[0].Retryable || rep.Approvals[0] != "ap-d3" {
		t.Fatalf("pending at the deadline: %+v %v %v", got, err, rep.Approvals)
	}
	// The front door asks its host instead of waiting.
	rep = Report{}
	got, err = p.g.Dispatch(WithReport(WithoutApprovalWait(ctx), &rep), "s", []envelope.ToolUseBlock{use("d4", "deploy", `{}`)})
	if err != nil || got[0].Code != classify.CodeApprovalPending || rep.Approvals[0] != "ap-d4" {
		t.Fatalf("without waiting: %+v %v %v", got, err, rep.Approvals)
	}
	// A cancelled caller gets the cancellation, as from the dispatcher.
	cctx, ccancel := context.WithCancel(ctx)
	go func() {
		natstest.Eventually(t, 5*time.Second, "held", func() bool { return p.a.isHeld("ap-d5") })
		ccancel()
	}()
	if _, err := p.g.Dispatch(cctx, "s", []envelope.ToolUseBlock{use("d5", "deploy", `{}`)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestGateNeverAnswersAnApprovalFromTheCache(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 0)
	ctx := acme(t.Context())
	p.a.decide("ap-r1", Decision{State: Approved, By: "alice"})
	if got, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("r1", "read", `{"path":"/secret/key"}`)}); err != nil || got[0].IsError {
		t.Fatalf("approved: %+v %v", got, err)
	}
	p.a.decide("ap-r2", Decision{State: Denied, By: "bob"})
	got, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("r2", "read", `{"path":"/secret/key"}`)})
	if err != nil || got[0].Code != classify.CodeNotApproved {
		t.Fatalf("the same input, denied this time, must not be answered from the cache: %+v %v", got, err)
	}
	// An input the rule does not name is cached as usual.
	for _, id := range []string{"r3", "r4"} {
		if _, err := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use(id, "read", `{"path":"/pub/x"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.next.count("read"); n != 2 {
		t.Fatalf("read ran %d times, want 2 (the approved call and the first public one)", n)
	}
}

func TestGateApprovalDoesNotHoldTheOtherCalls(t *testing.T) {
	t.Parallel()
	next := &countingNext{}
	p := newGate(t, next, 0)
	ctx, cancel := context.WithTimeout(acme(t.Context()), 10*time.Second)
	defer cancel()
	done := make(chan []envelope.Result)
	go func() {
		got, _ := p.g.Dispatch(ctx, "s", []envelope.ToolUseBlock{use("d", "deploy", `{}`), use("p", "plain", `{}`)})
		done <- got
	}()
	natstest.Eventually(t, 5*time.Second, "the plain call runs while the other waits", func() bool { return next.count("plain") == 1 })
	p.a.decide("ap-d", Decision{State: Approved})
	if got := <-done; got[0].IsError || got[1].IsError || next.count("deploy") != 1 {
		t.Fatalf("%+v", got)
	}
}

var _ pooltype.Catalog = memCatalog{}

func TestGateShareAFailedRunWithItsWaiters(t *testing.T) {
	t.Parallel()
	next := &countingNext{release: make(chan struct{}), started: make(chan struct{}, 100)}
	p := newGate(t, next, 0)
	const n = 10
	var wg sync.WaitGroup
	results := make([]envelope.Result, n)
	for i := range n {
		wg.Go(func() {
			got, err := p.g.Dispatch(acme(t.Context()), "s", []envelope.ToolUseBlock{use(string(rune('a'+i)), "fail", `{}`)})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = got[0]
		})
	}
	<-next.started
	natstest.Eventually(t, 5*time.Second, "the others wait on the claim", func() bool {
		p.c.mu.Lock()
		defer p.c.mu.Unlock()
		return p.c.claims[`fail|acme|{}`] && p.c.waiting == n-1
	})
	close(next.release)
	wg.Wait()
	if ran := next.count("fail"); ran != 1 {
		t.Fatalf("a failing call awaited by %d ran %d times, want 1 (its failure is shared, not run again in turn)", n, ran)
	}
	for i, r := range results {
		if !r.IsError || r.CallID != string(rune('a'+i)) {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	// A call that comes later runs again: failures are not cached.
	if _, err := p.g.Dispatch(acme(t.Context()), "s", []envelope.ToolUseBlock{use("later", "fail", `{}`)}); err != nil || next.count("fail") != 2 {
		t.Fatalf("later: %v, ran %d", err, next.count("fail"))
	}
}

func TestGateCallNotHeldIsNotRun(t *testing.T) {
	t.Parallel()
	p := newGate(t, &countingNext{}, 0)
	p.a.holdErr = errors.New("nats: timeout")
	got, err := p.g.Dispatch(acme(t.Context()), "s", []envelope.ToolUseBlock{use("d", "deploy", `{}`), use("p", "plain", `{}`)})
	if err != nil || got[0].Code != classify.CodeUnavailable || !got[0].Retryable || got[1].IsError {
		t.Fatalf("a call that could not be held must be answered unavailable (not pending: no approval is open), the others run: %+v %v", got, err)
	}
	if p.next.count("deploy") != 0 {
		t.Fatal("a call that could not be held must not run")
	}
}
