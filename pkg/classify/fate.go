package classify

import (
	"fmt"
	"strings"
)

// Fate names how one delivery of a call ended, and why a call was
// dead-lettered: the one vocabulary of Verdict.Fate and Verdict.Reason, of
// a worker's events (and so of its metrics' outcome and reason labels) and
// of a dead letter's reason (its Toolpool-Reason header). The values are
// wire and label values: they never change.
type Fate string

// How a delivery ends (Verdict.Fate, the outcome label of the worker
// metrics).
const (
	// FateSuccess: the result was published and the call acked.
	FateSuccess Fate = "success"
	// FateError: an is_error result was published, with no retry.
	FateError Fate = "error"
	// FateRetry: the call was NAKed, to run again after Verdict.Delay.
	FateRetry Fate = "retry"
	// FateDeadLetter: the call was moved to TOOL_DLQ (Verdict.Reason says
	// why) and its caller answered with an is_error result.
	FateDeadLetter Fate = "dead_letter"
	// FateHandedBack: the call went back to JetStream without an answer, for
	// another delivery: at once on shutdown, after Verdict.Delay when what
	// it had to write could not be written.
	FateHandedBack Fate = "handed_back"
	// FateStored: the call was answered from the result it already has in
	// TOOL_RESULTS; the tool did not run again.
	FateStored Fate = "stored"
	// FateOutcomeUnknown: an attempt of a call of a tool that is not
	// idempotent started and never reported, so the call was not run again:
	// it is dead-lettered with this reason and answered with an is_error
	// saying its outcome is unknown. It is a fate and a reason at once.
	FateOutcomeUnknown Fate = "outcome_unknown"
	// FateCancelled: the call's caller cancelled it, so the call was not
	// run (it was still queued) or its run was cancelled: the message is
	// acked, nothing is retried, dead-lettered or answered.
	FateCancelled Fate = "cancelled"
)

// Why a call was dead-lettered (Verdict.Reason, a dead letter's reason).
const (
	// FateExhausted: a transient error outlived the tool's retry attempts.
	FateExhausted Fate = "exhausted"
	// FateMalformed: the call message could not be decoded; it is
	// terminated, never delivered again.
	FateMalformed Fate = "malformed"
	// FatePoison: the call reached its consumer's MaxDeliver without any
	// worker reporting on it (it kills workers).
	FatePoison Fate = "poison"
	// FateExpired: the call's deadline passed before a worker started it.
	FateExpired Fate = "expired"
)

// deadLetterReasons is the list of reasons, in the order operators see them.
var deadLetterReasons = [...]Fate{FateExhausted, FateMalformed, FatePoison, FateExpired, FateOutcomeUnknown}

// DeadLetterReasons returns every reason a dead letter can give, in the
// order operators see them listed. The slice is the caller's.
func DeadLetterReasons() []Fate { return append([]Fate(nil), deadLetterReasons[:]...) }

// DeadLetterReasonList is the reasons in prose, for usage texts and error
// messages: "exhausted, malformed, poison, expired or outcome_unknown".
func DeadLetterReasonList() string {
	var b strings.Builder
	for i, r := range deadLetterReasons {
		switch {
		case i == len(deadLetterReasons)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(string(r))
	}
	return b.String()
}

// IsDeadLetterReason reports whether f is one of DeadLetterReasons.
func (f Fate) IsDeadLetterReason() bool {
	for _, r := range deadLetterReasons {
		if f == r {
			return true
		}
	}
	return false
}

// ParseDeadLetterReason returns the reason named s; the error lists the
// reasons. The empty string is no reason (no filter) and is accepted.
func ParseDeadLetterReason(s string) (Fate, error) {
	if f := Fate(s); s == "" || f.IsDeadLetterReason() {
		return f, nil
	}
	return "", fmt.Errorf("unknown dead-letter reason %q: want %s", s, DeadLetterReasonList())
}
