package policy

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// Tracing. With Config.Tracer on, a turn the gate applies to gets its
// calls' spans here, "call <tool>" (dispatch.StartCallSpan), so that a
// call's span runs from its admission — the cache, the approval, the
// budget — to its result; the dispatcher adds its own events to them
// (dispatch.WithCallSpans) and the gate ends them with the calls' final
// results. The gate's events:
//
//   - "cache": toolpool.cache.outcome = hit | miss | bypass | coalesced;
//   - "approval": toolpool.approval.outcome = held | approved | denied |
//     timed_out | pending | unavailable, with toolpool.approval.id;
//   - "budget": toolpool.budget.outcome = charged | refused |
//     unavailable, with toolpool.budget.name for a refusal.
//
// A turn the gate does not apply to goes to the dispatcher untouched,
// which starts the spans itself.

// Names of the gate's events and their attributes.
const (
	eventCache    = "cache"
	eventApproval = "approval"
	eventBudget   = "budget"

	attrCacheOutcome    = attribute.Key("toolpool.cache.outcome")
	attrApprovalOutcome = attribute.Key("toolpool.approval.outcome")
	attrApprovalID      = attribute.Key("toolpool.approval.id")
	attrBudgetOutcome   = attribute.Key("toolpool.budget.outcome")
	attrBudgetName      = attribute.Key("toolpool.budget.name")
)

// startSpans starts the spans of the turn's calls, when tracing is on.
func (t *gateTurn) startSpans() {
	tr := t.g.cfg.Tracer
	if !tr.On() {
		return
	}
	t.spans = make([]trace.Span, len(t.blocks))
	for i, b := range t.blocks {
		t.spans[i] = dispatch.StartCallSpan(t.ctx, tr, b.Name, b.ID, t.session)
	}
}

// event adds an event to call i's span (none with tracing off).
func (t *gateTurn) event(i int, name string, attrs ...attribute.KeyValue) {
	if t.spans == nil {
		return
	}
	t.spans[i].AddEvent(name, trace.WithAttributes(attrs...))
}

// cacheEvent records what the cache did for call i.
func (t *gateTurn) cacheEvent(i int, o CacheOutcome) {
	if t.spans != nil {
		t.event(i, eventCache, attrCacheOutcome.String(o.String()))
	}
}

// approvalEvent records what became of call i's approval.
func (t *gateTurn) approvalEvent(i int, outcome, id string) {
	if t.spans == nil {
		return
	}
	if id == "" {
		t.event(i, eventApproval, attrApprovalOutcome.String(outcome))
		return
	}
	t.event(i, eventApproval, attrApprovalOutcome.String(outcome), attrApprovalID.String(id))
}

// approvalOutcome names a decision's state for approvalEvent.
func approvalOutcome(s DecisionState) string {
	switch s {
	case Approved:
		return "approved"
	case Denied:
		return "denied"
	case TimedOut:
		return "timed_out"
	}
	return "pending"
}

// budgetEvent records what the budgets did with call i's cost.
func (t *gateTurn) budgetEvent(i int, outcome, budget string) {
	if t.spans == nil {
		return
	}
	if budget == "" {
		t.event(i, eventBudget, attrBudgetOutcome.String(outcome))
		return
	}
	t.event(i, eventBudget, attrBudgetOutcome.String(outcome), attrBudgetName.String(budget))
}

// subSpans are the spans of the calls at idx, for the dispatcher
// (dispatch.WithCallSpans); nil with tracing off.
func (t *gateTurn) subSpans(idx []int) []trace.Span {
	if t.spans == nil {
		return nil
	}
	sub := make([]trace.Span, len(idx))
	for j, i := range idx {
		sub[j] = t.spans[i]
	}
	return sub
}

// endSpans ends the calls' spans with their results, or with err when
// the turn failed as a whole.
func (t *gateTurn) endSpans(err error) {
	for i, s := range t.spans {
		if err != nil {
			dispatch.EndCallSpanErr(s, err)
		} else {
			dispatch.EndCallSpan(s, &t.results[i])
		}
	}
}
