package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

const (
	// pollWait is how long one round of pulling lasts at most before it is
	// sized again to the slots free then; it is also the expiry of each
	// pull request at the server, so it bounds how long a request lost with
	// a consumer leader (a failover) holds up a tool's pulling.
	pollWait = 5 * time.Second
	// maxPull caps the calls one round asks for.
	maxPull = 512
	// reensureAfter is how many rounds in a row must fail, after one said
	// the consumer was deleted, before the loop makes it again. "No
	// responders" alone may only be a leader election (a failover): the
	// loop tries making the consumer again at every
	// reensureAfterNoResponders-th such failure in a row.
	reensureAfter             = 2
	reensureAfterNoResponders = 8
)

// pull is the pull loop of one tool. Each round asks JetStream for as many
// calls as the worker has free slots, never more, so no call waits unseen
// in a client buffer where nothing keeps it alive: every call pulled
// either starts at once or queues for a slot in acquire, which sends
// in-progress acks for it. (Several tools may pull for the same free
// slots; the few calls that then queue are the only ones that wait.)
//
// A round is a nats.go Consume that stops by itself after n calls
// (StopAfter), or is drained after pollWait to be sized again. Draining,
// unlike cancelling a Fetch, unsubscribes first and still passes on what
// the client already holds, so a stopping worker hands those calls back
// at once and its own hand-backs cannot come back to it. Pull errors (a
// leader election, a server restart) end the round and are retried with a
// jittered backoff; when the consumer is gone (an operator deleted it) the
// loop makes it again from the tool's spec.
func (w *Worker) pull(ctx context.Context, cons js.Consumer, s *served, log *slog.Logger) {
	defer w.pulling.Done()
	defer close(s.pulled)
	failures := 0
	deleted := false // a pull said the consumer was deleted
	for !w.isDraining() && !s.quitting() {
		n, freed := w.slots.available()
		if n == 0 {
			select {
			case <-freed:
				continue
			case <-w.draining:
				return
			case <-s.quit:
				return
			}
		}
		err := w.round(ctx, cons, s, min(n, maxPull, s.maxAckPending))
		if w.isDraining() || s.quitting() {
			return
		}
		if err == nil {
			failures, deleted = 0, false
			continue
		}
		failures++
		if failures&(failures-1) == 0 { // 1, 2, 4, 8, ...: an outage does not flood the log
			log.Warn("pulling calls failed; retrying", "err", err, "failures", failures)
		}
		deleted = deleted || errors.Is(err, js.ErrConsumerDeleted) || errors.Is(err, js.ErrConsumerNotFound)
		if deleted && failures >= reensureAfter ||
			errors.Is(err, nats.ErrNoResponders) && failures%reensureAfterNoResponders == 0 {
			if c, err := jetstream.EnsureConsumer(ctx, w.js, s.spec); err == nil {
				cons, deleted = c, false
				log.Warn("the tool's consumer was gone; made it again", "consumer", jetstream.ConsumerName(s.tool.Name))
			}
		}
		select {
		case <-time.After(jetstream.RepublishDelay(failures)):
		case <-w.draining:
			return
		case <-s.quit:
			return
		}
	}
}

// round pulls up to n calls of s's tool, handing each to take as it
// arrives, until n came, pollWait passed, pulling failed (the error is
// returned) or the worker stops. When ctx ends, a drain is cut short (Stop's
// context ran out).
func (w *Worker) round(ctx context.Context, cons js.Consumer, s *served, n int) error {
	failed := make(chan error, 1)
	cc, err := cons.Consume(func(msg js.Msg) { w.take(msg, s) },
		js.PullMaxMessages(n), js.StopAfter(n), js.PullExpiry(pollWait),
		js.ConsumeErrHandler(func(_ js.ConsumeContext, err error) {
			select {
			case failed <- err:
			default:
			}
		}))
	if err != nil {
		return err
	}
	t := time.NewTimer(pollWait)
	defer t.Stop()
	select {
	case <-cc.Closed(): // n calls came
		return nil
	case err = <-failed:
	case <-t.C:
	case <-w.draining:
	case <-s.quit:
	}
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-ctx.Done():
		cc.Stop()
	}
	return err
}

// take starts a pulled call: at once when a slot is free, else once one
// is, keeping the message alive while it waits.
func (w *Worker) take(msg js.Msg, s *served) {
	j := &job{msg: msg, served: s, w: w}
	if w.isDraining() || s.quitting() {
		// Pulled while the worker stops, or stops serving the tool (its
		// pull is drained: the hand-back cannot come back to it): another
		// worker takes it.
		w.giveBack(j, 0)
		return
	}
	seq := j.seq()
	w.mu.Lock()
	if w.sealed { // pulled by a drain Stop stopped waiting for
		w.mu.Unlock()
		w.giveBack(j, 0)
		return
	}
	if held := w.seqs[seq]; held != nil && !held.settled.Load() {
		// This worker holds the message already and has not settled it: a
		// NATS server that was killed before it stored the first delivery
		// hands it out again, or its AckWait ran out while the job waited.
		// Acks and heartbeats count by stream sequence, so the held job
		// settles this delivery too; running it again would run the call
		// twice.
		w.mu.Unlock()
		w.cfg.Logger.Info("a call this worker already holds was delivered again; the held one answers it",
			"tool", s.tool.Name, "stream_seq", seq)
		return
	}
	if seq != 0 {
		w.seqs[seq] = j
		if w.takeCancel(seq, j) {
			j.cancelled.Store(true) // its cancellation came first
		}
	}
	w.jobs[j] = struct{}{}
	w.mu.Unlock()
	if w.slots.take() {
		w.pool.Run(j) // w.run(j)
		return
	}
	w.pool.Go(func() {
		w.queued.Queued(s.tool.Name, 1)
		got := w.acquire(j, s.heartbeat)
		w.queued.Queued(s.tool.Name, -1)
		switch {
		case got:
			w.run(j)
		case j.cancelled.Load() && !w.isDraining():
			w.process(j) // settles it without running it, and without a slot
			w.finish(j, false)
		default:
			w.giveBack(j, 0) // the worker stops, or stops serving the tool: another one takes it
			w.finish(j, false)
		}
	})
}

// runTask is the job as the pool's task: run.
func (j *job) runTask() { j.w.run(j) }

// run processes a job that holds a slot, then gives the slot back.
func (w *Worker) run(j *job) {
	defer w.finish(j, true)
	w.process(j)
}

// finish forgets a job, giving its slot back when it held one.
func (w *Worker) finish(j *job, slot bool) {
	w.mu.Lock()
	delete(w.jobs, j)
	if seq := j.seq(); w.seqs[seq] == j {
		delete(w.seqs, seq)
	}
	last := w.sealed && len(w.jobs) == 0
	w.mu.Unlock()
	if slot {
		w.slots.put()
	}
	if last {
		close(w.idle) // Stopped: the worker stopped and its last call is done
	}
}

// acquire queues for a slot, keeping j's message alive with InProgress
// while it waits. It reports false when the worker stops first, or stops
// serving the tool (Unserve), or when the call's caller cancels it.
func (w *Worker) acquire(j *job, heartbeat time.Duration) bool {
	msg := j.msg
	ch := w.slots.wait()
	select {
	case <-ch:
		return true
	default:
	}
	wake := j.wakeOnCancel()
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ch:
			return true
		case <-wake:
			w.slots.cancel(ch)
			return false
		case <-t.C:
			_ = msg.InProgress()
		case <-w.handBack:
			w.slots.cancel(ch)
			return false
		case <-j.served.handBack: // the worker no longer serves the tool
			w.slots.cancel(ch)
			return false
		}
	}
}
