package dispatch

import (
	"fmt"
	"time"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// ErrSaturated is matched (errors.Is) by the error of a Dispatch that
// admission control refused: the dispatcher has Config.MaxCallsInFlight
// calls waiting, a tool's queue holds Config.MaxQueueDepth calls, or a
// tool's queue holds more work than the turn has time left for. The
// error is a *SaturatedError; it matches ErrUnavailable too, so callers
// that retry an unavailable pool retry a saturated one. Nothing of the
// turn was published.
var ErrSaturated = pooltype.ErrSaturated

// SaturatedError says why a turn was refused and when to try again.
type SaturatedError struct {
	// Tool is the tool whose queue is full; empty when the dispatcher's
	// bound on calls in flight was reached.
	Tool string
	// Load and Limit are the calls in flight (or in Tool's queue) and the
	// bound they reached; Limit is 0 when Wait is set.
	Load, Limit int64
	// Wait, when not zero, is why the turn was refused: the estimated
	// time until the turn's last call to Tool would be done (the calls
	// queued and in progress ahead of it, and the turn's own, divided by
	// the rate at which the tool's workers have drained its queue), more
	// than the turn's Left.
	Wait time.Duration
	// Left is the time the turn had left until its deadline, when Wait is
	// set.
	Left time.Duration
	// RetryAfter is when to try again.
	RetryAfter time.Duration
}

// Error says what is saturated and when to try again.
func (e *SaturatedError) Error() string {
	if e.Wait > 0 {
		return fmt.Sprintf("dispatch: %s: %d calls are queued for %s, about %s of work, more than the %s the turn has left",
			ErrSaturated, e.Load, e.Tool, e.Wait.Round(100*time.Millisecond), e.Left.Round(100*time.Millisecond))
	}
	if e.Tool != "" {
		return fmt.Sprintf("dispatch: %s: %d calls are queued for %s (the limit is %d)", ErrSaturated, e.Load, e.Tool, e.Limit)
	}
	return fmt.Sprintf("dispatch: %s: %d calls are in flight (the limit is %d)", ErrSaturated, e.Load, e.Limit)
}

// Is matches ErrSaturated and ErrUnavailable.
func (e *SaturatedError) Is(target error) bool {
	return target == ErrSaturated || target == ErrUnavailable
}

// SaturatedResult is the transient is_error a call of a refused turn is
// answered with: the model reads that the pool is saturated and when to
// try again.
func SaturatedResult(id, tool string, e *SaturatedError) envelope.Result {
	r := errorResult(id, tool, envelope.ClassTransient, classify.CodeTransient, classify.SaturatedMessage(classify.Saturation{
		Tool: tool, Busy: e.Tool, Wait: e.Wait, Left: e.Left, RetryAfter: e.RetryAfter,
	}))
	r.RetryAfter = e.RetryAfter
	return r
}
