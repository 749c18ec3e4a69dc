package dispatch

import (
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// Metrics receives the dispatcher's measurements. Implementations must be
// safe for concurrent use and must not block. Tool names come from the
// Catalog, so their number is bounded.
type Metrics interface {
	// CallDispatched counts a call stored in TOOL_CALLS (a duplicate publish
	// of the same call included).
	CallDispatched(tool string)
	// ResultReceived counts a result that reached its waiting caller;
	// elapsed runs from the dispatch to the result's arrival. class is
	// empty for a success.
	ResultReceived(tool string, class envelope.Class, elapsed time.Duration)
	// LateResult counts a result that arrived after its callers stopped
	// waiting (deadline passed, cancelled, or publish of the turn failed).
	LateResult(tool string)
	// DuplicateResult counts a second result for an already answered call.
	DuplicateResult(tool string)
	// Expired counts a call answered with is_error because its deadline
	// passed with no result.
	Expired(tool string)
	// Pending adds delta to the number of calls waiting for a result.
	Pending(delta int)
}

// NopMetrics is a Metrics that records nothing. Embed it to implement only
// some of the methods.
type NopMetrics struct{}

// CallDispatched does nothing.
func (NopMetrics) CallDispatched(string) {}

// ResultReceived does nothing.
func (NopMetrics) ResultReceived(string, envelope.Class, time.Duration) {}

// LateResult does nothing.
func (NopMetrics) LateResult(string) {}

// DuplicateResult does nothing.
func (NopMetrics) DuplicateResult(string) {}

// Expired does nothing.
func (NopMetrics) Expired(string) {}

// Pending does nothing.
func (NopMetrics) Pending(int) {}

// RejectMetrics is implemented by a Metrics that also counts the calls the
// dispatcher answers itself, without publishing them: an unknown tool, a
// tool no live worker serves, a call without an id, an input that is too
// large. The dispatcher checks for it with a type assertion, so a Metrics
// without it keeps working.
type RejectMetrics interface {
	// CallRejected counts one such call. tool is the name the model gave;
	// known reports whether the catalog knows it (false for an unknown tool
	// and for a call without an id, refused before the lookup), so an
	// implementation can label unknown names with one fixed value. code is
	// the is_error result's code.
	CallRejected(tool string, known bool, code string)
}

// rejected reports a call answered without being published.
func (d *Dispatcher) rejected(tool string, known bool, code string) {
	if m, ok := d.metrics.(RejectMetrics); ok {
		m.CallRejected(tool, known, code)
	}
}

// CancelMetrics is implemented by a Metrics that also counts the calls
// the dispatcher cancelled pool-wide because their caller gave up. The
// dispatcher checks for it with a type assertion.
type CancelMetrics interface {
	// CallCancelled counts one call of tool cancelled pool-wide.
	CallCancelled(tool string)
}

// HeldMetrics is implemented by a Metrics that also counts the calls
// answered at their deadline while they still waited at the scheduler.
// The dispatcher checks for it with a type assertion.
type HeldMetrics interface {
	// CallHeldExpired counts one call of tool that waited at the
	// scheduler until its deadline; code is classify.CodeFairShare,
	// CodeKeyConcurrency or CodeKeyRate.
	CallHeldExpired(tool, code string)
}

// heldExpired counts a call answered at its deadline while held.
// (expire counts it as expired too).
func (d *Dispatcher) heldExpired(tool, code string) {
	if m, ok := d.metrics.(HeldMetrics); ok {
		m.CallHeldExpired(tool, code)
	}
}
