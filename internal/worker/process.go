package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// job is one delivery of a call message being handled.
type job struct {
	msg     js.Msg
	served  *served
	meta    *js.MsgMetadata // parsed once, by metadata
	metaErr error
	metaVal js.MsgMetadata // what meta points to when read from the reply subject
	attempt int
	settled atomic.Bool // set by whoever acks/naks the message

	// Set by process, for the verbs settle.Settle calls (see settle.go).
	w    *Worker
	call *envelope.Call // nil until the message decoded

	// Cancellation by the caller (cancel.go) and progress (progress.go).
	cancelled atomic.Bool   // the caller cancelled the call
	mu        sync.Mutex    // guards stop, wake, the run's timer, prog, ran, out, done and grace
	wake      chan struct{} // closed at a cancellation while the job queues for a slot
	stop      context.CancelCauseFunc
	rctx      runCtx // the handler's context, kept here: no allocation of its own
	prog      *progressState
	ran       bool // the handler returned (or was abandoned): its reports go nowhere

	handler handlerRun  // the pool's task that runs the handler (execute)
	out     outcome     // what the handler returned, once done
	done    bool        // the handler returned: out is set
	grace   *time.Timer // execute's AbandonGrace timer, once the run was cancelled

	// The call's logger (callLog), kept here: no allocation of its own.
	logH callHandler
	log  slog.Logger

	// The delivery's spans (trace.go): nil with tracing off. A pointer
	// keeps the job in its allocation size class.
	tr *jobTrace

	// The run's timer (runContext, tick): heartbeats and the timeout.
	timer         *time.Timer
	timeout, beat time.Duration
	timedOut      bool // the timeout fired
	runEnded      bool // endRun: the timer is stopped for good
}

// metadata returns the message's JetStream metadata, parsed at the first
// call only: from its reply subject into the job (parseAckSubject), else
// by the client.
func (j *job) metadata() (*js.MsgMetadata, error) {
	if j.meta == nil && j.metaErr == nil {
		if parseAckSubject(j.msg.Reply(), &j.metaVal) {
			j.meta = &j.metaVal
		} else {
			j.meta, j.metaErr = j.msg.Metadata()
		}
	}
	return j.meta, j.metaErr
}

// seq is the call message's stream sequence; 0 when it has no metadata.
func (j *job) seq() uint64 {
	if m, err := j.metadata(); err == nil {
		return m.Sequence.Stream
	}
	return 0
}

// settle reports whether the caller is the one to settle the message.
func (j *job) settle() bool { return j.settled.CompareAndSwap(false, true) }

// process handles one delivery from decoding to ack or nak. It finds out
// what happened to the call (it does not decode, its caller cancelled it,
// it has its result already, its deadline passed, it ran and how it
// ended) and hands that to conclude, the one settle path, where the tool's
// classify.Policy.Decide gives the verdict that settle.Settle carries out.
func (w *Worker) process(j *job) {
	start := time.Now()
	rt := j.served.tool
	j.w = w
	meta, err := j.metadata()
	if err != nil {
		// Not a JetStream message: nothing to ack.
		w.cfg.Logger.Error("call message without JetStream metadata", "tool", rt.Name, "err", err)
		return
	}
	j.attempt = int(meta.NumDelivered)
	ev := Event{Tool: rt.Name, Attempt: j.attempt, QueueWait: start.Sub(meta.Timestamp)}
	d := delivery{Delivery: classify.Delivery{Attempt: j.attempt}, start: start}

	// The input aliases the message's data: nats.go allocates it for this
	// message alone, and nothing writes to it.
	call, err := envelope.DecodeCallShared(j.msg.Data(), w.cfg.Limits)
	if err == nil && call.Tool != rt.Name {
		err = fmt.Errorf("envelope names tool %q but arrived on the subject of %q", call.Tool, rt.Name)
	}
	if err != nil {
		d.Case, d.Decision = classify.CaseMalformed, malformedDecision(err)
		d.malformed = strings.TrimPrefix(j.msg.Subject(), jetstream.CallSubjectPrefix)
		log := w.cfg.Logger.With(slog.String("tool", d.malformed), slog.Uint64("stream_seq", meta.Sequence.Stream))
		if w.cfg.Tracer.On() {
			w.startSpans(j, meta, start, d.malformed, nil)
		}
		w.conclude(j, &d, &ev, log)
		return
	}
	log := j.callLog(call) // attributes added only when it logs
	j.call = call
	d.Deadline = call.Deadline
	if w.cfg.Tracer.On() {
		w.startSpans(j, meta, start, rt.Name, call)
	}
	w.attend(j, meta, &d, &ev, log)
	w.conclude(j, &d, &ev, log)
}

// attend finds out what happens to the decoded call of j and records it in
// d: it runs the call unless its caller cancelled it, it has its result
// already, its deadline passed, its input is invalid, or an earlier
// attempt of a tool that is not idempotent may have run.
func (w *Worker) attend(j *job, meta *js.MsgMetadata, d *delivery, ev *Event, log *slog.Logger) {
	rt, call := j.served.tool, j.call
	if j.cancelled.Load() { // before it ran: a cancellation came first
		d.Case, d.Decision = classify.CaseCancelled, decCancelled
		return
	}
	// A redelivered call may have run to its result already (the worker
	// died between publishing it and acking); a call of a tool that is not
	// idempotent is checked on every delivery, which also finds the result
	// of a re-post that came after the duplicate window.
	if (j.attempt > 1 || !rt.Idempotent) && w.lookUpStored(j, meta, d, log) {
		return
	}
	once := !rt.Idempotent && w.cfg.History != nil // at most one start: see begin
	if !call.Deadline.IsZero() && d.start.After(call.Deadline) {
		d.Case, d.Decision = classify.CaseExpired, decExpired
		if once {
			w.startedBefore(j, d, ev)
		}
		return
	}
	if verr := rt.Validate(call.Input); verr != nil {
		d.Decision = classify.Classify(verr)
		return
	}
	if once && !w.begin(j, meta, d, ev, log) {
		return
	}
	w.runCall(j, d, ev, log)
}

// runCall executes the call of j and records in d how it ended: an attempt
// with the decision its error gives, a cancellation by its caller, or a
// hand-back by the worker's shutdown.
func (w *Worker) runCall(j *job, d *delivery, ev *Event, log *slog.Logger) {
	rt := j.served.tool
	w.cfg.Metrics.InFlight(rt.Name, 1)
	execStart := time.Now()
	out, err, panicked, handedBack := w.execute(j, j.call)
	ev.ExecTime = time.Since(execStart)
	ev.Executed, ev.Panicked = true, panicked
	w.cfg.Metrics.InFlight(rt.Name, -1)
	switch {
	case handedBack:
		// The worker is shutting down and cancelled the call: another
		// worker takes it.
		d.Case = classify.CaseShutdown
	case err != nil && j.cancelled.Load():
		// The caller cancelled it: an error it returned is the
		// cancellation's (a result it still produced is published).
		d.Case, d.Decision, d.ran = classify.CaseCancelled, decCancelled, true
	default:
		d.Decision, d.out = classify.Classify(err), out
		if panicked {
			log.Error("tool panicked; answered with an internal error", "err", err)
		}
		w.pauseOnRateLimit(rt, d.Decision, log)
	}
}

// handlerRun runs a job's handler on a goroutine of the pool (execute).
// It leaves the outcome, a panic as a *classify.PanicError, in the job
// (returned).
type handlerRun struct{ j *job }

func (h *handlerRun) runTask() {
	var o outcome
	j := h.j
	defer func() {
		if r := recover(); r != nil {
			o = outcome{err: &classify.PanicError{Value: r}, panicked: true}
		}
		j.returned(o)
	}()
	o.out, o.err = j.served.tool.Handler(&j.rctx, j.call.Input)
}

// outcome is what a handler returned, and the cause of its context's
// cancellation when it returned (nil: not cancelled).
type outcome struct {
	out      tools.Output
	err      error
	panicked bool
	cause    error
}

// errReturned ends a run's context when its handler returns before it was
// cancelled: that wakes execute, which waits on the context's Done channel
// (a channel of its own per call would be one more allocation).
var errReturned = errors.New("worker: the handler returned")

// returned hands the handler's outcome o to execute: it is kept in the job,
// and execute is woken by the context's end, or by its grace timer when
// the context had ended before.
func (j *job) returned(o outcome) {
	o.cause = context.Cause(&j.rctx)
	j.mu.Lock()
	j.out, j.done = o, true
	grace := j.grace
	j.mu.Unlock()
	j.stop(errReturned)
	if grace != nil {
		grace.Reset(0)
	}
}

// outcomeOrGrace returns the handler's outcome once it returned (ok);
// else, at the first call, it arms the job's grace timer (returned makes it
// fire at once) and returns it.
func (j *job) outcomeOrGrace(grace time.Duration) (o outcome, ok bool, armed *time.Timer) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done {
		return j.out, true, nil
	}
	if j.grace == nil {
		j.grace = time.NewTimer(grace)
		return outcome{}, false, j.grace
	}
	return outcome{}, false, nil
}

// execute runs the tool under its timeout (cut to the call's deadline),
// sending InProgress heartbeats while it runs (the run's timer, tick). A panic becomes a
// *classify.PanicError. A handler that ignores cancellation is abandoned after
// AbandonGrace. handedBack reports that the worker's shutdown cancelled it.
func (w *Worker) execute(j *job, call *envelope.Call) (out tools.Output, err error, panicked, handedBack bool) {
	rt := j.served.tool
	timeout := rt.Timeout
	if !call.Deadline.IsZero() {
		if rem := time.Until(call.Deadline); rem < timeout {
			timeout = max(rem, time.Millisecond)
		}
	}
	ctx := j.runContext(w.handlerContext(j), timeout, j.served.heartbeat)
	defer j.endRun()

	j.handler = handlerRun{j: j}
	w.pool.Run(&j.handler)

	done := ctx.Done() // ends when the handler returns, or when the run is cancelled
	var grace <-chan time.Time
	for {
		select {
		case <-done:
		case <-grace:
		}
		o, ok, armed := j.outcomeOrGrace(w.cfg.AbandonGrace)
		if ok {
			j.endProgress()
			return o.out, causeOf(o.cause, o.err), o.panicked, errors.Is(o.cause, ErrShutdown)
		}
		if armed != nil { // cancelled: the handler has AbandonGrace to return
			defer armed.Stop()
			done, grace = nil, armed.C
			continue
		}
		w.cfg.Logger.Warn("tool ignored cancellation; abandoned it", "tool", rt.Name, "call_id", call.ID,
			"attempt", j.attempt, "session", call.Session, "traceparent", call.Traceparent)
		j.endProgress()
		return tools.Output{}, context.Cause(ctx), false, w.shutdownCancelled(ctx)
	}
}

// causeOf replaces a bare context error returned by a handler with the
// cause of its context's cancellation (e.g. a *classify.TimeoutError that
// knows the timeout); cause is nil when the context was not cancelled.
func causeOf(cause, err error) error {
	if err == nil || cause == nil {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return cause
	}
	return err
}

func (w *Worker) shutdownCancelled(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrShutdown)
}

// publishDLQ publishes a dead letter and waits for the PubAck.
func (w *Worker) publishDLQ(e *settle.Entry, msgID string) error {
	m, err := e.Msg(jetstream.DLQSubject(e.Tool), msgID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.PublishTimeout)
	defer cancel()
	_, err = w.js.PublishMsg(ctx, m)
	return err
}
