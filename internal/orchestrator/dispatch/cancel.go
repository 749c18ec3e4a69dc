package dispatch

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// Cancellation. When the ctx given to Dispatch is cancelled (not its
// deadline) before every call was answered, the calls left that this turn
// stored in TOOL_CALLS and that no other Dispatch waits for are cancelled
// pool-wide, in three steps:
//
//  1. a core NATS message on tools.cancel.<tool>.<key> (body: the call
//     message's stream sequence) reaches every worker: the one running the
//     call cancels its context with worker.ErrCancelled, the one holding it
//     queued settles it without running it, and the others remember it a
//     while, in case the message is on its way to them;
//  2. the message is deleted from TOOL_CALLS, so a call still queued is
//     never delivered, even to a worker that starts later;
//  3. the cancellation is sent again, for a worker that took the message
//     between the first two steps.
//
// A call whose result came first is not cancelled (its slot is answered),
// and a cancellation that reaches a worker after the call finished changes
// nothing. A call JetStream reported as published before by someone else
// (a duplicate) is not cancelled: another caller may wait for it. The call
// table counts the call's cancellations, so the same call dispatched again
// is published under a new Nats-Msg-Id (callMsgID) and runs again, instead of
// being dropped as a duplicate of the deleted message.

// cancelWait bounds the wait for the PubAck of a call whose publish was in
// flight when it was cancelled, and the deletion of a cancelled message.
const cancelWait = 5 * time.Second

// unackedCall is a call whose publish was in flight when its turn's ctx was
// cancelled.
type unackedCall struct {
	idx      int
	paf      js.PubAckFuture
	attempts int
}

// cancelTarget is a call message to cancel.
type cancelTarget struct {
	tool, key string
	seq       uint64          // 0: not known yet, see paf
	paf       js.PubAckFuture // the publish in flight, when seq is 0
	attempts  int
}

// cancel takes the turn's unanswered calls out of the call table and
// cancels pool-wide those it stored (or was storing) that nobody else
// waits for.
func (t *turn) cancel(now time.Time) {
	d := t.d
	var targets []cancelTarget
	for i := range t.calls {
		sl := &t.slots[i]
		if sl.state == slotAnswered {
			continue
		}
		var paf js.PubAckFuture
		var attempts int
		for _, u := range t.unacked {
			if u.idx == i {
				paf, attempts = u.paf, u.attempts
			}
		}
		mine := sl.seq != 0 || paf != nil
		if !d.calls.leaveFor(sl.key, waiter{ch: t.ch, idx: i, t: t}, now, mine) || !mine {
			continue
		}
		targets = append(targets, cancelTarget{tool: t.calls[i].Name, key: sl.key, seq: sl.seq, paf: paf, attempts: attempts})
		d.log.Debug("call cancelled by its caller", slog.String("call_id", t.calls[i].ID), slog.String("tool", t.calls[i].Name),
			slog.String("session", t.session), slog.String("traceparent", t.traceparent))
	}
	if len(targets) > 0 {
		d.cancelCalls(targets)
	}
}

// cancelCalls cancels the targets pool-wide: the cancellations of the
// messages whose sequence is known go out at once, on the caller's
// goroutine; the rest (PubAcks, deletions, the second cancellations) in
// the background.
func (d *Dispatcher) cancelCalls(targets []cancelTarget) {
	m, _ := d.metrics.(CancelMetrics)
	for _, c := range targets {
		if m != nil {
			m.CallCancelled(c.tool)
		}
		if c.seq != 0 {
			d.publishCancel(c)
		}
	}
	d.tasks.Go(func() {
		ctx, cancel := context.WithTimeout(d.Life(), cancelWait)
		defer cancel()
		for i := range targets {
			c := &targets[i]
			if c.seq == 0 {
				select {
				case ack := <-c.paf.Ok():
					if ours(ack, c.attempts) {
						c.seq = ack.Sequence
						d.publishCancel(*c)
					}
				case <-c.paf.Err():
				case <-ctx.Done():
				}
			}
		}
		calls, err := d.callsStream(ctx)
		for _, c := range targets {
			if c.seq == 0 {
				continue
			}
			if err == nil {
				// Not found: it was acked (it finished) or deleted already.
				_ = calls.DeleteMsg(ctx, c.seq)
			}
			d.publishCancel(c)
		}
		if err != nil {
			d.log.Debug("deleting cancelled calls from TOOL_CALLS failed", slog.Any("error", err))
		}
	})
}

// publishCancel sends the cancellation of c's message to the workers.
func (d *Dispatcher) publishCancel(c cancelTarget) {
	var b [20]byte
	if err := d.nc.Publish(jetstream.CancelSubject(c.tool, c.key), strconv.AppendUint(b[:0], c.seq, 10)); err != nil {
		d.log.Warn("sending the cancellation of a call failed", slog.String("tool", c.tool), slog.Any("error", err))
	}
}

// callsStream returns TOOL_CALLS, looked up once.
func (d *Dispatcher) callsStream(ctx context.Context) (js.Stream, error) {
	if s := d.queue.Load(); s != nil {
		return *s, nil
	}
	s, err := d.js.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		return nil, err
	}
	d.queue.Store(&s)
	return s, nil
}
