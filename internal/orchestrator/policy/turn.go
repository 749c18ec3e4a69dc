package policy

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// gateTurn is one Dispatch through the gate.
type gateTurn struct {
	g       *Gate
	ctx     context.Context
	session string
	blocks  []envelope.ToolUseBlock

	calls    []Call
	results  []envelope.Result
	answered []bool
	// cacheKey is the cache key of a call whose tool caches ("" otherwise),
	// outcome what the cache did for it.
	cacheKey []string
	outcome  []CacheOutcome
	// approval is a call's approval id ("" when it needs none).
	approval []string
	spends   []Spend
	// spans are the calls' spans with tracing on (trace.go); nil when off.
	spans []trace.Span
	// budgetRefused counts the calls refused by a spent budget;
	// retryAfter is the soonest reset among them.
	// They are shared by the turn's goroutines: mu guards them.
	mu            sync.Mutex
	budgetRefused int
	retryAfter    durationMin
}

func (g *Gate) newTurn(ctx context.Context, session string, blocks []envelope.ToolUseBlock) *gateTurn {
	n := len(blocks)
	t := &gateTurn{
		g: g, ctx: ctx, session: session, blocks: blocks,
		calls: make([]Call, n), results: make([]envelope.Result, n), answered: make([]bool, n),
		cacheKey: make([]string, n), outcome: make([]CacheOutcome, n), approval: make([]string, n),
		spends: make([]Spend, n),
	}
	tenant, key := dispatch.TenantFrom(ctx), KeyNameFrom(ctx)
	for i, b := range blocks {
		info, _ := g.cfg.Catalog.Lookup(ctx, b.Name)
		t.calls[i] = Call{Tenant: tenant, Key: key, Session: session, ID: b.ID, Tool: b.Name, Input: b.Input, Info: info}
	}
	t.startSpans()
	return t
}

// run is the turn: the cache, then every call not answered by it goes on
// (approval, budget, dispatch) — the calls waiting for approval in the
// background, so that the others of the turn need not wait for a person.
func (t *gateTurn) run() ([]envelope.Result, error) {
	t.lookUpCache()
	var gated, free []int
	for i := range t.calls {
		if t.answered[i] {
			continue
		}
		if t.needsApproval(i) {
			gated = append(gated, i)
		} else {
			free = append(free, i)
		}
	}
	var wg sync.WaitGroup
	var gatedErr error
	if len(gated) > 0 {
		wg.Go(func() { gatedErr = t.approveThenRun(gated) })
	}
	err := t.chargeAndRun(free)
	wg.Wait()
	t.report()
	t.endSpans(cmpErr(err, gatedErr))
	if err = cmpErr(err, gatedErr); err != nil {
		return nil, err
	}
	if t.budgetRefused == len(t.calls) {
		return nil, &ExhaustedError{RetryAfter: t.retryAfter.d, Results: t.results}
	}
	return t.results, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// answer gives call i its result, written by the gate.
func (t *gateTurn) answer(i int, r envelope.Result) {
	t.results[i], t.answered[i] = r, true
}

// lookUpCache answers the calls whose results are cached, and gives the
// others of caching tools their keys.
func (t *gateTurn) lookUpCache() {
	cache := t.g.cfg.Cache
	if cache == nil {
		return
	}
	bypass := noCache(t.ctx)
	for i := range t.calls {
		c := &t.calls[i]
		if c.Info.Cache == nil || t.needsApproval(i) {
			continue // a call that needs approval is never answered without it
		}
		key, ok := cache.Key(c)
		if !ok {
			continue // the dispatcher answers an input that is not an object
		}
		t.cacheKey[i] = key
		if bypass {
			t.outcome[i] = CacheBypass
			t.cacheEvent(i, CacheBypass)
			continue
		}
		res, hit, err := cache.Get(t.ctx, key)
		if err != nil {
			t.g.log.Warn("policy: result cache look-up failed; the call runs", "tool", c.Tool, "err", err)
		}
		if !hit {
			t.outcome[i] = CacheMiss
			t.cacheEvent(i, CacheMiss)
			continue
		}
		res.CallID = c.ID
		t.results[i], t.answered[i], t.outcome[i] = res, true, CacheHit
		t.cacheEvent(i, CacheHit)
	}
}

func (t *gateTurn) needsApproval(i int) bool {
	a := t.g.cfg.Approvals
	return a != nil && t.calls[i].Info.Approval != nil && a.Required(&t.calls[i])
}

// approveThenRun holds the calls at idx for approval, waits for the
// decisions (unless the front door asked to ask its host instead), and
// runs the approved ones.
func (t *gateTurn) approveThenRun(idx []int) error {
	a := t.g.cfg.Approvals
	dispatch.SignalAdmitted(t.ctx) // a durable task's creator is answered while its calls wait
	var approved []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for _, i := range idx {
		wg.Go(func() {
			d, err := t.decide(a, i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errNotHeld):
				t.approvalEvent(i, "unavailable", "")
				t.answer(i, unavailableResult(&t.calls[i]))
			case err != nil:
				firstErr = cmpErr(firstErr, err)
			case d.State == Approved:
				t.approvalEvent(i, "approved", d.ID)
				approved = append(approved, i)
			default:
				t.approvalEvent(i, approvalOutcome(d.State), d.ID)
				t.answer(i, decisionResult(&t.calls[i], d))
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return t.chargeAndRun(approved)
}

// decide is the decision on call i: held, then waited for.
func (t *gateTurn) decide(a Approvals, i int) (Decision, error) {
	c := &t.calls[i]
	d, err := a.Hold(t.ctx, c)
	if err != nil {
		if t.ctx.Err() != nil {
			return d, t.ctxErr()
		}
		t.g.log.Warn("policy: an approval could not be recorded; the call is not run", "tool", c.Tool, "err", err)
		return Decision{}, errNotHeld
	}
	t.approval[i] = d.ID
	if d.State == Pending {
		t.approvalEvent(i, "held", d.ID)
	}
	if d.State != Pending || approvalNoWait(t.ctx) {
		return d, nil
	}
	d, err = a.Wait(t.ctx, d.ID)
	if err != nil && t.ctx.Err() != nil {
		return d, t.ctxErr()
	}
	return d, nil
}

// errNotHeld says a call that needs approval could not be recorded as
// waiting for one: it is answered as the pool being unavailable (it was
// not run, and no approval is open for it).
var errNotHeld = errors.New("policy: the call could not be held for approval")

// ctxErr is the turn's error when its ctx ended: nil for its deadline (the
// calls are answered as still waiting), the cancellation otherwise.
func (t *gateTurn) ctxErr() error {
	if errors.Is(t.ctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	return ctxError(t.ctx)
}

// chargeAndRun spends the calls' costs from their budgets and dispatches
// those with room.
func (t *gateTurn) chargeAndRun(idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	run := idx[:0:0]
	b := t.g.cfg.Budgets
	for _, i := range idx {
		c := &t.calls[i]
		if b == nil || !b.Active(c.Tenant, c.Key) {
			run = append(run, i)
			continue
		}
		spend, err := b.Charge(t.ctx, c)
		var ex *Exhausted
		switch {
		case errors.As(err, &ex):
			t.budgetEvent(i, "refused", ex.Budget.Name)
			t.answer(i, exhaustedResult(c, ex.Budget))
			t.mu.Lock()
			t.budgetRefused++
			t.retryAfter.add(ex.Budget.ResetIn)
			t.mu.Unlock()
		case err != nil:
			t.g.log.Warn("policy: a budget could not be charged; the call is not run", "tool", c.Tool, "err", err)
			t.budgetEvent(i, "unavailable", "")
			t.answer(i, unavailableResult(c))
		default:
			t.budgetEvent(i, "charged", "")
			t.spends[i] = spend
			run = append(run, i)
		}
	}
	run = t.useApprovals(run)
	err := t.dispatch(run)
	if err != nil {
		for _, i := range run {
			t.refund(i)
		}
	}
	return err
}

// useApprovals records the use of the approvals of the approved calls
// among idx, just before they are dispatched (Approvals.Use: an approval
// is for one run), and returns the calls that may go on (idx, filtered in
// place). A call whose approval was spent meanwhile is answered with its
// decision (pending: it is held again; the caller sends it again to wait
// for the new decision), one whose use could not be recorded as the pool
// being unavailable; neither runs, and what they spent of their budgets
// is given back. It is called after the budgets' charges, so that a call
// a budget refuses does not use its approval.
func (t *gateTurn) useApprovals(idx []int) []int {
	a := t.g.cfg.Approvals
	if a == nil {
		return idx
	}
	run := idx[:0]
	for _, i := range idx {
		id := t.approval[i]
		if id == "" { // not held: it needed no approval
			run = append(run, i)
			continue
		}
		c := &t.calls[i]
		d, err := a.Use(t.ctx, c, id)
		switch {
		case err != nil:
			if t.ctx.Err() == nil {
				t.g.log.Warn("policy: the use of an approval could not be recorded; the call is not run", "tool", c.Tool, "approval", id, "err", err)
			}
			t.approvalEvent(i, "unavailable", id)
			t.refund(i)
			t.answer(i, unavailableResult(c))
		case d.State == Approved:
			run = append(run, i)
		case d.State == Pending: // spent: held again
			t.approvalEvent(i, "held", id)
			t.refund(i)
			t.answer(i, decisionResult(c, d))
		default:
			t.approvalEvent(i, approvalOutcome(d.State), id)
			t.refund(i)
			t.answer(i, decisionResult(c, d))
		}
	}
	return run
}

// report counts the cache's outcomes and fills the front door's Report,
// when it asked for one.
func (t *gateTurn) report() {
	var cached, held bool
	for i := range t.calls {
		if o := t.outcome[i]; o != CacheNone {
			t.g.cfg.Metrics.CacheOutcome(t.calls[i].Tool, o)
			cached = true
		}
		held = held || t.approval[i] != ""
	}
	r := reportFrom(t.ctx)
	if r == nil {
		return
	}
	if cached {
		r.Cache = t.outcome
	}
	if held {
		r.Approvals = t.approval
	}
}

// durationMin keeps the least of the durations added.
type durationMin struct {
	d   time.Duration
	set bool
}

func (m *durationMin) add(d time.Duration) {
	if !m.set || d < m.d {
		m.d, m.set = d, true
	}
}
