package pooltype

import (
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// WorkerEvent describes one delivery of a call handled by a worker.
type WorkerEvent struct {
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

// PoisonCall describes a call the watcher set aside.
type PoisonCall struct {
	Tool       string
	CallID     string // empty when the call did not decode
	StreamSeq  uint64 // where it was in TOOL_CALLS
	Deliveries int
	Answered   bool // an is_error result was published to its caller
	Swept      bool // found by a sweep, not from an advisory
}
