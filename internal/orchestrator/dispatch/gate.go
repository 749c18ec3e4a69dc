package dispatch

import (
	"context"
	"sync/atomic"
)

// turnGate lets Dispatch calls in while the dispatcher runs, and lets Stop
// wait for those in progress (its drain). It is lock-free on purpose: every
// Dispatch passes it, and startstop.Base.Running takes a lock. Its zero
// value is closed and not closing; idle must be made before use.
type turnGate struct {
	open    atomic.Bool   // Start succeeded and Stop has not begun
	closing atomic.Bool   // Stop has begun: no turn is let in again
	turns   atomic.Int64  // Dispatch calls in progress
	idle    chan struct{} // signalled when turns falls to 0 while closing; room for 1
}

// enter counts a Dispatch call in and reports whether it may go on; a call
// refused is counted out again. Stop sees either the gate's turns or a
// refusal: enter adds before it looks, shut closes before it waits.
func (g *turnGate) enter() bool {
	g.turns.Add(1)
	if g.open.Load() {
		return true
	}
	g.leave()
	return false
}

// leave counts out a Dispatch call that enter let in.
func (g *turnGate) leave() {
	if g.turns.Add(-1) == 0 && g.closing.Load() {
		select {
		case g.idle <- struct{}{}:
		default:
		}
	}
}

// openUp lets turns in: the end of a successful Start.
func (g *turnGate) openUp() { g.open.Store(true) }

// shut refuses every turn from now on.
func (g *turnGate) shut() {
	g.closing.Store(true)
	g.open.Store(false)
}

// stopping reports whether shut was called: a refused turn is told the
// dispatcher stopped rather than that it was never started.
func (g *turnGate) stopping() bool { return g.closing.Load() }

// wait returns nil once no turn is in progress, or ctx's cause when ctx
// ends first. The gate must be shut.
func (g *turnGate) wait(ctx context.Context) error {
	for g.turns.Load() > 0 {
		select {
		case <-g.idle:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}
