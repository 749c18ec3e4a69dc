package worker

import (
	"context"

	"github.com/toolpool/toolpool/pkg/classify"
)

// Stop stops pulling, lets calls in flight finish until ctx is done, then
// cancels the rest with ErrShutdown and hands them back to JetStream (NAK
// without delay) so another worker takes them. Pulls still open are
// drained (what they bring is handed back) before anything else is handed
// back; calls pulled but still waiting for a slot go back right after. Stop
// returns nil when every call finished in time and ctx.Err() otherwise; the
// worker cannot be started again. A second Stop, or one from another
// goroutine, waits for the first and returns its error.
func (w *Worker) Stop(ctx context.Context) error {
	err := w.Base.Stop(ctx, ErrShutdown, w.drain)
	w.seal() // a worker never started has nothing to wait for
	return err
}

// Stopped is closed once everything the worker started has returned after
// Stop: its pull loops and the processing of every call (a call cancelled
// by Stop returns within AbandonGrace, its handler abandoned if it ignores
// the cancellation).
func (w *Worker) Stopped() <-chan struct{} { return w.idle }

// isDraining reports whether Stop's drain has begun.
func (w *Worker) isDraining() bool {
	select {
	case <-w.draining:
		return true
	default:
		return false
	}
}

// drain is the first stage of Stop (startstop.Base.Stop): it ends the
// pulling, hands back what pulls still bring and the calls queued for a
// slot, and waits for the calls running until ctx ends; then it claims
// and hands back the calls still running (Base then cancels them, with
// ErrShutdown, through the worker's life). It returns ctx.Err() when calls
// were still running.
func (w *Worker) drain(ctx context.Context) error {
	w.mu.Lock()
	close(w.draining) // under w.mu: Serve starts no pull loop from now on
	stopPull := w.stopPull
	w.mu.Unlock()
	// The pull loops end on draining, draining their pulls: what those
	// still bring is handed back. Cut the drains short when ctx ends.
	pulled := make(chan struct{})
	go func() { w.pulling.Wait(); close(pulled) }()
	select {
	case <-pulled:
	case <-ctx.Done():
	}
	stopPull() // cuts drains still running short; releases the context otherwise
	<-pulled
	// Only now, with no pull of this worker left at the server, may queued
	// calls go back: a call handed back earlier could be delivered to this
	// worker's own pull again.
	close(w.handBack)
	w.seal()

	select {
	case <-w.idle:
		w.release()
		w.cfg.Logger.Info("worker stopped", "worker_id", w.cfg.WorkerID)
		return nil
	case <-ctx.Done():
	}
	left := w.handBackRunning()
	w.release()
	w.cfg.Logger.Warn("worker stopped with calls still running; handed them back", "worker_id", w.cfg.WorkerID, "calls", left)
	return ctx.Err()
}

// handBackRunning claims the calls still running and hands them back,
// before Base cancels them, so that none of them settles its own message
// after Stop has returned. It returns how many there were.
func (w *Worker) handBackRunning() int {
	w.mu.Lock()
	left := make([]*job, 0, len(w.jobs))
	for j := range w.jobs {
		left = append(left, j)
	}
	w.mu.Unlock()
	for _, j := range left {
		ev := Event{Tool: j.served.tool.Name, Outcome: classify.FateHandedBack}
		if md, err := j.msg.Metadata(); err == nil { // j.attempt belongs to the job's goroutine
			ev.Attempt = int(md.NumDelivered)
		}
		if w.giveBack(j, ev.Attempt) {
			w.cfg.Metrics.Observe(ev)
		}
	}
	return len(left)
}

// release lets go of what the worker holds once its calls are settled or
// handed back: the pool's idle goroutines (a handler abandoned or still
// running ends when it returns), the cancellations' subscription, and the
// acks and NAKs not yet flushed.
func (w *Worker) release() {
	w.pool.close()
	w.unsubscribeCancels()
	w.flush()
}

// seal marks the jobs complete, once pulling has ended for good (or never
// began): idle is closed as soon as none runs.
func (w *Worker) seal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sealed {
		return
	}
	w.sealed = true
	if len(w.jobs) == 0 {
		close(w.idle)
	}
}

// flush waits until the server has processed every ack and NAK the worker
// sent, so a caller that closes the connection (or exits) right after Stop
// loses none of them: a lost NAK would hold a handed-back call until its
// AckWait, a lost ack would run a finished call again.
func (w *Worker) flush() {
	nc := w.js.Conn()
	if nc == nil || nc.IsClosed() {
		return
	}
	if err := nc.FlushTimeout(w.cfg.PublishTimeout); err != nil {
		w.cfg.Logger.Warn("flushing acks and hand-backs failed; some calls may run again after their ack wait", "err", err)
	}
}
