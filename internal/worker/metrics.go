package worker

import (
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Event describes one delivery of a call handled by a worker.
type Event struct {
	Tool string
	// Outcome is the delivery's fate (classify.Verdict.Fate): FateSuccess,
	// FateError, FateRetry, FateDeadLetter, FateHandedBack, FateStored or
	// FateOutcomeUnknown.
	Outcome    classify.Fate
	Class      envelope.Class // empty on success
	Code       string
	Attempt    int
	Executed   bool          // the handler ran (false for validation errors, expiry, …)
	Panicked   bool          // the handler panicked
	QueueWait  time.Duration // from publish to the start of this delivery's handling
	ExecTime   time.Duration // the handler's run time
	RetryDelay time.Duration // for FateRetry
	DLQReason  classify.Fate // why it was dead-lettered (classify.Verdict.Reason), if it was
	// HistoryFailed is set when recording or reading the call's attempt
	// history failed (the call went on without it).
	HistoryFailed bool
}

// Metrics observes a worker. Implementations must be safe for concurrent use
// and cheap: they are called on the hot path. The Prometheus implementation
// lives outside this package.
type Metrics interface {
	// Observe is called once per delivery, when its fate is settled.
	Observe(Event)
	// InFlight is called with +1 when a call starts executing and -1 when it
	// ends.
	InFlight(tool string, delta int)
}

// QueueMetrics is implemented by a Metrics that also counts the calls a
// worker has pulled but cannot start yet, because every slot is busy
// (several tools pulled for the same free slots). Queued is called with +1
// when such a call starts waiting for a slot and -1 when it stops waiting
// (it got a slot, or the worker stopped and handed it back). Calls that
// stay queued for long mean a worker's slots are held by another tool's
// slow calls while this tool's calls wait: see docs/operations.md.
type QueueMetrics interface {
	Queued(tool string, delta int)
}

type nopMetrics struct{}

func (nopMetrics) Queued(string, int) {}

func (nopMetrics) Observe(Event)        {}
func (nopMetrics) InFlight(string, int) {}
