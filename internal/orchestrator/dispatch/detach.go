package dispatch

import (
	"context"
	"errors"
	"fmt"
)

// ErrDetached is the cause with which a front door cancels the turns still
// in flight when it stops (a graceful stop whose drain ran out, its
// connections closed): unlike its caller's cancellation, it leaves the
// turn's calls in the pool. A call published keeps running, or queued, and
// its result is stored, so the same call posted again (to another replica,
// or after a restart) gets that result instead of running from the start;
// a call still held by the scheduler was never published and runs when it
// is posted again. Cancel the ctx given to Dispatch with
// context.WithCancelCause(…)(ErrDetached).
var ErrDetached = errors.New("dispatch: the caller's front door stopped; calls left to run")

// detached reports whether the turn's ctx was cancelled with ErrDetached:
// its calls are then left in the pool, not cancelled.
func (t *turn) detached() bool { return errors.Is(context.Cause(t.ctx), ErrDetached) }

// ctxCancelled is Dispatch's error for a ctx cancelled (not its deadline):
// context.Canceled, and ErrDetached when that was the cause.
func (t *turn) ctxCancelled() error {
	if t.detached() {
		return fmt.Errorf("dispatch: %w: %w", t.ctx.Err(), ErrDetached)
	}
	return fmt.Errorf("dispatch: %w", t.ctx.Err())
}
