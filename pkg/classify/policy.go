package classify

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Default retry policy.
const (
	MaxAttemptsDefault = 3
	BaseDelayDefault   = time.Second
	MaxDelayDefault    = 30 * time.Second
	JitterDefault      = 0.25
)

// MaxAttemptsLimit is the largest MaxAttempts Validate accepts.
const MaxAttemptsLimit = 100

// ErrInvalidPolicy is wrapped by every error Validate returns.
var ErrInvalidPolicy = errors.New("invalid retry policy")

// Policy is a tool's retry policy. Zero fields take the defaults
// (WithDefaults); Delay and Fate apply them, so the zero Policy is the default
// policy. Jitter 0 therefore means JitterDefault: jitter cannot be turned off,
// it is what keeps a fleet of workers from retrying in lockstep.
type Policy struct {
	MaxAttempts int           // executions in all, including the first. Default 3.
	BaseDelay   time.Duration // delay after the first failure. Default 1s.
	MaxDelay    time.Duration // cap on any delay, Retry-After included. Default 30s.
	Jitter      float64       // ± fraction of the delay, 0..1. Default 0.25.
}

// WithDefaults returns p with zero fields set to the defaults.
func (p Policy) WithDefaults() Policy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, MaxAttemptsDefault)
	p.BaseDelay = cmp.Or(p.BaseDelay, BaseDelayDefault)
	p.MaxDelay = cmp.Or(p.MaxDelay, MaxDelayDefault)
	p.Jitter = cmp.Or(p.Jitter, JitterDefault)
	return p
}

// Validate names the first bad field. It checks p as it is: call it on
// p.WithDefaults() to accept zero fields. The error wraps ErrInvalidPolicy.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 1 || p.MaxAttempts > MaxAttemptsLimit:
		return fmt.Errorf("%w: MaxAttempts must be between 1 and %d, got %d", ErrInvalidPolicy, MaxAttemptsLimit, p.MaxAttempts)
	case p.BaseDelay <= 0:
		return fmt.Errorf("%w: BaseDelay must be positive, got %s", ErrInvalidPolicy, p.BaseDelay)
	case p.MaxDelay < p.BaseDelay:
		return fmt.Errorf("%w: MaxDelay (%s) must be at least BaseDelay (%s)", ErrInvalidPolicy, p.MaxDelay, p.BaseDelay)
	case !(p.Jitter >= 0 && p.Jitter <= 1): // also catches NaN
		return fmt.Errorf("%w: Jitter must be between 0 and 1, got %v", ErrInvalidPolicy, p.Jitter)
	}
	return nil
}

// Rand is the random source for jitter: a float in [0,1).
// *math/rand/v2.Rand satisfies it.
type Rand interface{ Float64() float64 }

// globalRand is the math/rand/v2 global source.
type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// fixedClock keeps the backoff's elapsed-time bookkeeping off the real clock:
// we never use MaxElapsedTime.
type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Time{} }

// Delay is the delay before attempt n+1, after attempt n (n >= 1) failed:
// min(base·2^(n-1), max) with ±jitter, then raised to at least retryAfter and
// capped at max. A nil rnd uses the math/rand/v2 global source. The result is
// never negative and never above max.
func (p Policy) Delay(n int, retryAfter time.Duration, rnd Rand) time.Duration {
	p = p.WithDefaults()
	if rnd == nil {
		rnd = globalRand{}
	}
	d := p.exponential(n)
	if j := p.Jitter; j > 0 {
		f := 1 + j*(2*rnd.Float64()-1) // in [1-j, 1+j)
		d = time.Duration(float64(d) * f)
	}
	d = max(d, retryAfter, 0)
	return min(d, p.MaxDelay)
}

// exponential is min(base·2^(n-1), max), stepped with cenkalti/backoff's
// ExponentialBackOff without randomization. Attempts are few, and it stops
// stepping at the cap.
func (p Policy) exponential(n int) time.Duration {
	if p.BaseDelay <= 0 || p.MaxDelay <= 0 {
		return 0
	}
	b := backoff.ExponentialBackOff{
		InitialInterval:     p.BaseDelay,
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         p.MaxDelay,
		Stop:                backoff.Stop,
		Clock:               fixedClock{},
	}
	b.Reset()
	d := b.NextBackOff() // the delay after attempt 1
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d = b.NextBackOff()
	}
	return min(d, p.MaxDelay)
}

// Action is what a worker does with a call message after an attempt.
type Action int

// The actions.
const (
	// ActionReply publishes the result (success or is_error), then acks.
	ActionReply Action = iota
	// ActionRetry naks the message with Verdict.Delay.
	ActionRetry
	// ActionDeadLetter writes the call to TOOL_DLQ, publishes an is_error
	// result, then acks.
	ActionDeadLetter
)

// String names the action: "reply", "retry" or "dead_letter".
func (a Action) String() string {
	switch a {
	case ActionReply:
		return "reply"
	case ActionRetry:
		return "retry"
	case ActionDeadLetter:
		return "dead_letter"
	default:
		return fmt.Sprintf("Action(%d)", int(a))
	}
}

// Verdict is the fate of a call after one attempt.
type Verdict struct {
	Action Action
	Delay  time.Duration // for ActionRetry
	// GaveUp is set when a retryable error is answered now because the next
	// attempt would start past the call's deadline.
	GaveUp bool
}

// Fate is the one place that decides a call's fate after attempt n (1-based)
// ended with decision d (zero Decision = success): reply, retry after a
// jittered delay, or dead-letter. deadline zero means none.
//
//   - success, or an error that is not retryable: ActionReply;
//   - retryable with attempts left (n < MaxAttempts): ActionRetry after
//     Delay(n, d.RetryAfter, rnd), unless the next attempt would start at or
//     past the deadline: then ActionReply with GaveUp;
//   - retryable with no attempts left: ActionDeadLetter.
func (p Policy) Fate(d Decision, n int, now, deadline time.Time, rnd Rand) Verdict {
	p = p.WithDefaults()
	if d.Class == envelope.ClassNone || !d.Retryable {
		return Verdict{Action: ActionReply}
	}
	if n >= p.MaxAttempts {
		return Verdict{Action: ActionDeadLetter}
	}
	delay := p.Delay(n, d.RetryAfter, rnd)
	if !deadline.IsZero() && !now.Add(delay).Before(deadline) {
		return Verdict{Action: ActionReply, GaveUp: true}
	}
	return Verdict{Action: ActionRetry, Delay: delay}
}
