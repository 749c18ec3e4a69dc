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
	MaxAttemptsDefault = 3                // Policy.MaxAttempts: executions of a call, the first included
	BaseDelayDefault   = time.Second      // Policy.BaseDelay: the delay before the second attempt
	MaxDelayDefault    = 30 * time.Second // Policy.MaxDelay: the longest delay
	JitterDefault      = 0.25             // Policy.Jitter: delays vary by ±25%
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

// Case is what happened to one delivery of a call, as Decide sees it.
type Case int

// The cases.
const (
	// CaseAttempt: the call ran, or was refused before it ran (its input
	// was invalid); Delivery.Decision says how it ended.
	CaseAttempt Case = iota
	// CaseStored: the call already has its result in TOOL_RESULTS (a
	// redelivery of a call that finished, or a re-post of it).
	CaseStored
	// CaseMalformed: the call message could not be decoded.
	CaseMalformed
	// CaseExpired: the call's deadline passed before a worker started it.
	CaseExpired
	// CaseStartedBefore: an earlier attempt of a call of a tool that is
	// not idempotent started and never reported.
	CaseStartedBefore
	// CaseShutdown: the worker is stopping and cancelled the call, or
	// never got to start it.
	CaseShutdown
	// CaseStoreFailed: what the call needed written or read in JetStream
	// (its result, its dead letter, its start marker, the look-up of its
	// stored result) could not be, after the retries in place.
	CaseStoreFailed
	// CasePoison: the call reached its consumer's MaxDeliver without any
	// attempt reporting (it kills the workers running it).
	CasePoison
	// CaseCancelled: the call's caller cancelled it (it gave up waiting)
	// before the call ran or while it ran.
	CaseCancelled
)

// String names the case, as its constant does without "Case".
func (c Case) String() string {
	switch c {
	case CaseAttempt:
		return "attempt"
	case CaseStored:
		return "stored"
	case CaseMalformed:
		return "malformed"
	case CaseExpired:
		return "expired"
	case CaseStartedBefore:
		return "started_before"
	case CaseShutdown:
		return "shutdown"
	case CaseStoreFailed:
		return "store_failed"
	case CasePoison:
		return "poison"
	case CaseCancelled:
		return "cancelled"
	default:
		return fmt.Sprintf("Case(%d)", int(c))
	}
}

// Delivery is what Decide knows of one delivery of a call.
type Delivery struct {
	// Case is how the delivery ended.
	Case Case
	// Decision is how the attempt ended (CaseAttempt); the zero Decision
	// is a success.
	Decision Decision
	// Attempt is the delivery's number, from 1 (JetStream's NumDelivered).
	Attempt int
	// Now is when the attempt ended (CaseAttempt).
	Now time.Time
	// Deadline is the call's deadline; zero means none.
	Deadline time.Time
}

// Verdict is the fate of a call after one delivery: how it ends, why it is
// dead-lettered, and when it is delivered again.
type Verdict struct {
	// Fate is how the delivery ends.
	Fate Fate
	// Reason is why the call is dead-lettered; empty when it is not.
	Reason Fate
	// Delay is how long the call waits before it is delivered again
	// (FateRetry, FateHandedBack; 0: at once).
	Delay time.Duration
	// GaveUp is set when a retryable error is answered now because the next
	// attempt would start past the call's deadline.
	GaveUp bool
}

// DeadLetters reports whether the call is copied to TOOL_DLQ.
func (v Verdict) DeadLetters() bool { return v.Reason != "" }

// Terminates reports whether the call message is terminated (never
// delivered again, and never answered: it did not decode) rather than acked
// or handed back.
func (v Verdict) Terminates() bool { return v.Reason == FateMalformed }

// Requeues reports whether the call message goes back to JetStream, to be
// delivered again after Delay.
func (v Verdict) Requeues() bool { return v.Fate == FateRetry || v.Fate == FateHandedBack }

// Answers reports whether the call's caller gets a result from this
// delivery. A cancelled call's caller has gone: it gets none.
func (v Verdict) Answers() bool { return !v.Requeues() && !v.Terminates() && v.Fate != FateCancelled }

// Decide is the one place that decides a call's fate after a delivery: every
// verdict a call can get comes from here, and the worker and the poison
// watcher carry it out with settle.Settle.
//
//   - CaseAttempt, success: FateSuccess; an error that is not retryable:
//     FateError;
//   - CaseAttempt, retryable with attempts left (Attempt < MaxAttempts):
//     FateRetry after Delay(Attempt, RetryAfter, rnd), unless the next
//     attempt would start at or past the deadline: then FateError with
//     GaveUp;
//   - CaseAttempt, retryable with no attempts left: FateDeadLetter, reason
//     FateExhausted;
//   - CaseStored: FateStored;
//   - CaseMalformed, CaseExpired, CasePoison: FateDeadLetter with reason
//     FateMalformed (the message is terminated), FateExpired, FatePoison;
//   - CaseStartedBefore: FateOutcomeUnknown, dead-lettered with that
//     reason;
//   - CaseShutdown: FateHandedBack at once;
//   - CaseCancelled: FateCancelled: acked, never retried, never
//     dead-lettered, and nobody answered (the caller has gone);
//   - CaseStoreFailed, or a Case Decide does not know: FateHandedBack after
//     BaseDelay (the tool did not fail; the call's next delivery starts
//     over).
func (p Policy) Decide(d Delivery, rnd Rand) Verdict {
	p = p.WithDefaults()
	switch d.Case {
	case CaseAttempt:
		return p.afterAttempt(d, rnd)
	case CaseStored:
		return Verdict{Fate: FateStored}
	case CaseMalformed:
		return Verdict{Fate: FateDeadLetter, Reason: FateMalformed}
	case CaseExpired:
		return Verdict{Fate: FateDeadLetter, Reason: FateExpired}
	case CasePoison:
		return Verdict{Fate: FateDeadLetter, Reason: FatePoison}
	case CaseStartedBefore:
		return Verdict{Fate: FateOutcomeUnknown, Reason: FateOutcomeUnknown}
	case CaseShutdown:
		return Verdict{Fate: FateHandedBack}
	case CaseCancelled:
		return Verdict{Fate: FateCancelled}
	default: // CaseStoreFailed
		return Verdict{Fate: FateHandedBack, Delay: p.BaseDelay}
	}
}

// afterAttempt is Decide for CaseAttempt; p has its defaults.
func (p Policy) afterAttempt(d Delivery, rnd Rand) Verdict {
	if d.Decision.Class == envelope.ClassNone {
		return Verdict{Fate: FateSuccess}
	}
	if !d.Decision.Retryable {
		return Verdict{Fate: FateError}
	}
	if d.Attempt >= p.MaxAttempts {
		return Verdict{Fate: FateDeadLetter, Reason: FateExhausted}
	}
	delay := p.Delay(d.Attempt, d.Decision.RetryAfter, rnd)
	if !d.Deadline.IsZero() && !d.Now.Add(delay).Before(d.Deadline) {
		return Verdict{Fate: FateError, GaveUp: true}
	}
	return Verdict{Fate: FateRetry, Delay: delay}
}
