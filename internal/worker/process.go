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

	"github.com/nats-io/nats.go"
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
	attempt int
	settled atomic.Bool // set by whoever acks/naks the message

	// Set by process, for the verbs settle.Settle calls (see settle.go).
	w    *Worker
	call *envelope.Call // nil until the message decoded

	// Cancellation by the caller (cancel.go) and progress (progress.go).
	cancelled atomic.Bool   // the caller cancelled the call
	mu        sync.Mutex    // guards stop, wake, prog and ran
	wake      chan struct{} // closed at a cancellation while the job queues for a slot
	stop      context.CancelCauseFunc
	timer     *time.Timer // the handler's timeout
	rctx      runCtx      // the handler's context, kept here: no allocation of its own
	prog      *progressState
	ran       bool // the handler returned (or was abandoned): its reports go nowhere
}

// metadata returns the message's JetStream metadata, parsed at the first
// call only.
func (j *job) metadata() (*js.MsgMetadata, error) {
	if j.meta == nil && j.metaErr == nil {
		j.meta, j.metaErr = j.msg.Metadata()
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

// process handles one delivery from decoding to ack or nak. Every fate it
// reaches is decided by the tool's classify.Policy.Decide and carried out
// by settle.Settle (w.settle).
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

	// The input aliases the message's data: nats.go allocates it for this
	// message alone, and nothing writes to it.
	call, err := envelope.DecodeCallShared(j.msg.Data(), w.cfg.Limits)
	if err == nil && call.Tool != rt.Name {
		err = fmt.Errorf("envelope names tool %q but arrived on the subject of %q", call.Tool, rt.Name)
	}
	if err != nil {
		w.deadLetterMalformed(j, meta, err, ev)
		return
	}
	log := w.callLogger(rt.Name, call, j.attempt) // attributes added only when it logs
	j.call = call
	if j.cancelled.Load() { // before it ran: a cancellation came first
		w.settleCancelled(j, call, start, ev, false, log)
		return
	}

	// A redelivered call may have run to its result already (the worker
	// died between publishing it and acking); a call of a tool that is not
	// idempotent is checked on every delivery, which also finds the result
	// of a re-post that came after the duplicate window.
	if j.attempt > 1 || !rt.Idempotent {
		if w.answerStored(j, call, meta, ev, rt.Idempotent, log) {
			return
		}
	}
	once := !rt.Idempotent && w.cfg.History != nil // at most one start: see begin

	if !call.Deadline.IsZero() && start.After(call.Deadline) {
		if once && w.startedBefore(j, call, meta, &ev, log) {
			return
		}
		w.expire(j, call, meta, ev, log)
		return
	}

	var out tools.Output
	var d classify.Decision
	if verr := rt.Validate(call.Input); verr != nil {
		d = classify.Classify(verr)
	} else if once && !w.begin(j, call, meta, &ev, log) {
		return
	} else {
		w.cfg.Metrics.InFlight(rt.Name, 1)
		execStart := time.Now()
		var execErr error
		var handedBack bool
		out, execErr, ev.Panicked, handedBack = w.execute(j, call)
		ev.ExecTime = time.Since(execStart)
		ev.Executed = true
		w.cfg.Metrics.InFlight(rt.Name, -1)
		if execErr != nil && j.cancelled.Load() && !handedBack {
			// The caller cancelled it: an error it returned is the
			// cancellation's (a result it still produced is published).
			w.settleCancelled(j, call, start, ev, true, log)
			return
		}
		if handedBack {
			// The worker is shutting down and cancelled the call: another
			// worker takes it.
			if w.giveBack(j, j.attempt) {
				ev.Outcome = classify.FateHandedBack
				w.cfg.Metrics.Observe(ev)
			}
			return
		}
		d = classify.Classify(execErr)
		if ev.Panicked {
			log.Error("tool panicked; answered with an internal error", "err", execErr)
		}
	}
	ev.Class, ev.Code = d.Class, d.Code
	w.pauseOnRateLimit(rt, d, log)

	v := rt.Retry.Decide(classify.Delivery{Decision: d, Attempt: j.attempt, Now: time.Now(), Deadline: call.Deadline}, w.cfg.Rand)
	switch v.Fate {
	case classify.FateRetry:
		w.recordAttempt(call, w.attemptOf(j, d, start, ev), &ev, log)
		if !w.settle(j, v, settle.Settlement{}) {
			return
		}
		ev.RetryDelay = v.Delay
		log.Info("attempt failed; retrying", "class", d.Class, "code", d.Code, "delay", v.Delay)

	case classify.FateDeadLetter:
		entry := settle.NewEntry(v.Reason, rt.Name, call.ID, j.msg.Data())
		entry.Error = d.Cause
		entry.SourceSeq = meta.Sequence.Stream
		entry.Attempts = w.recordAttempt(call, w.attemptOf(j, d, start, ev), &ev, log)
		entry.FirstFailure, entry.LastFailure = entry.Attempts[0].Started, time.Now()
		res := w.errorResult(call, d, j.attempt, true, false, ev)
		if !w.answer(j, v, settle.Settlement{Letter: &entry, LetterID: call.Key}, res) {
			return
		}
		log.Warn("attempts exhausted; call dead-lettered", "class", d.Class, "code", d.Code)

	default: // FateSuccess, FateError
		var res *envelope.Result
		if v.Fate == classify.FateSuccess {
			res = w.result(call, j.attempt, ev)
			res.Content = out.Content.Truncate(w.cfg.Limits.MaxContentBytes)
		} else {
			res = w.errorResult(call, d, j.attempt, false, v.GaveUp, ev)
			log.Info("call failed", "class", d.Class, "code", d.Code, "gave_up_for_deadline", v.GaveUp)
		}
		if !w.answer(j, v, settle.Settlement{}, res) {
			return
		}
		if v.Fate == classify.FateError { // recorded after the reply: it does not delay the result
			w.recordAttempt(call, w.attemptOf(j, d, start, ev), &ev, log)
		}
	}
	ev.Outcome, ev.DLQReason = v.Fate, v.Reason
	w.cfg.Metrics.Observe(ev)
}

// outcome is what a handler goroutine returns.
type outcome struct {
	out      tools.Output
	err      error
	panicked bool
}

// execute runs the tool under its timeout (cut to the call's deadline),
// sending InProgress heartbeats while it runs. A panic becomes a
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
	ctx := j.runContext(w.ctx, timeout)
	defer j.endRun()
	ctx = tools.WithReporter(ctx, j)
	ctx = tools.WithCallInfo(ctx, tools.CallInfo{
		ID: call.ID, Key: call.Key, Tenant: call.Tenant, Tool: rt.Name, Session: call.Session, Attempt: j.attempt,
		Deadline: call.Deadline, WorkerID: w.cfg.WorkerID, Traceparent: call.Traceparent,
	})

	done := make(chan outcome, 1)
	w.pool.Go(func() {
		var o outcome
		defer func() {
			if r := recover(); r != nil {
				o = outcome{err: &classify.PanicError{Value: r}, panicked: true}
			}
			done <- o
		}()
		o.out, o.err = rt.Handler(ctx, call.Input)
	})

	hb := time.NewTicker(j.served.heartbeat)
	defer hb.Stop()
	var grace <-chan time.Time
	for {
		select {
		case o := <-done:
			j.endProgress()
			return o.out, w.causeOf(ctx, o.err), o.panicked, w.shutdownCancelled(ctx)
		case <-hb.C:
			_ = j.msg.InProgress()
		case <-ctx.Done():
			if grace == nil {
				t := time.NewTimer(w.cfg.AbandonGrace)
				defer t.Stop()
				grace = t.C
			}
		case <-grace:
			w.cfg.Logger.Warn("tool ignored cancellation; abandoned it", "tool", rt.Name, "call_id", call.ID,
				"attempt", j.attempt, "session", call.Session, "traceparent", call.Traceparent)
			j.endProgress()
			return tools.Output{}, context.Cause(ctx), false, w.shutdownCancelled(ctx)
		}
	}
}

// causeOf replaces a bare context error returned by a handler with the
// context's cause (e.g. a *classify.TimeoutError that knows the timeout).
func (w *Worker) causeOf(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return context.Cause(ctx)
	}
	return err
}

func (w *Worker) shutdownCancelled(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrShutdown)
}

// result starts a result envelope for call.
func (w *Worker) result(call *envelope.Call, attempt int, ev Event) *envelope.Result {
	return &envelope.Result{
		CallID: call.ID, Key: call.Key, Tool: call.Tool, Attempts: attempt, WorkerID: w.cfg.WorkerID,
		QueueWait: ev.QueueWait, ExecTime: ev.ExecTime,
	}
}

// errorResult is an is_error result carrying d and its message for the model.
func (w *Worker) errorResult(call *envelope.Call, d classify.Decision, attempt int, exhausted, gaveUp bool, ev Event) *envelope.Result {
	res := w.result(call, attempt, ev)
	rt, _ := w.cfg.Registry.Lookup(call.Tool)
	var timeout time.Duration
	if rt != nil {
		timeout = rt.Timeout
	}
	res.IsError = true
	res.Class, res.Code, res.Retryable, res.RetryAfter = d.Class, d.Code, d.Retryable, d.RetryAfter
	res.Content = envelope.Text(d.Message(classify.MessageInput{
		Tool: call.Tool, Attempts: attempt, Timeout: timeout, Exhausted: exhausted, GaveUp: gaveUp,
	}))
	return res
}

// publishResultData publishes an encoded result of call to its caller.
func (w *Worker) publishResultData(call *envelope.Call, data []byte) error {
	m := &nats.Msg{Subject: jetstream.ResultSubject(call.ReplyTo, call.Key), Data: data, Header: nats.Header{}}
	m.Header.Set(nats.MsgIdHdr, jetstream.ResultMsgID(call.ReplyTo, call.Key))
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.PublishTimeout)
	defer cancel()
	_, err := w.js.PublishMsg(ctx, m)
	return err
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

// deadLetterMalformed moves an undecodable call message to TOOL_DLQ and
// terminates it, so it is never redelivered.
func (w *Worker) deadLetterMalformed(j *job, meta *js.MsgMetadata, decodeErr error, ev Event) {
	tool := strings.TrimPrefix(j.msg.Subject(), jetstream.CallSubjectPrefix)
	log := w.cfg.Logger.With(slog.String("tool", tool), slog.Uint64("stream_seq", meta.Sequence.Stream))
	v := j.served.tool.Retry.Decide(classify.Delivery{Case: classify.CaseMalformed, Attempt: j.attempt}, w.cfg.Rand)
	entry := settle.NewEntry(v.Reason, tool, "", j.msg.Data())
	entry.Error = decodeErr.Error()
	entry.SourceSeq = meta.Sequence.Stream
	entry.FirstFailure = time.Now()
	entry.LastFailure = entry.FirstFailure
	msgID := fmt.Sprintf("malformed-%s-%d", jetstream.StreamCalls, meta.Sequence.Stream)
	if !w.settle(j, v, settle.Settlement{Letter: &entry, LetterID: msgID}) {
		return
	}
	log.Warn("malformed call dead-lettered", "err", decodeErr)
	ev.Outcome, ev.DLQReason, ev.Class, ev.Code = v.Fate, v.Reason, envelope.ClassValidation, "malformed"
	w.cfg.Metrics.Observe(ev)
}

// expire answers a call whose deadline passed before it started: dead letter
// with reason expired (operators may replay it), is_error to the caller.
func (w *Worker) expire(j *job, call *envelope.Call, meta *js.MsgMetadata, ev Event, log *slog.Logger) {
	v := j.served.tool.Retry.Decide(classify.Delivery{Case: classify.CaseExpired, Attempt: j.attempt, Deadline: call.Deadline}, w.cfg.Rand)
	entry := settle.NewEntry(v.Reason, call.Tool, call.ID, j.msg.Data())
	entry.Error = "the call's deadline passed before a worker started it"
	entry.SourceSeq = meta.Sequence.Stream
	entry.FirstFailure = time.Now()
	entry.LastFailure = entry.FirstFailure
	if entry.Attempts = w.loadAttempts(call, &ev, log); len(entry.Attempts) > 0 {
		entry.FirstFailure = entry.Attempts[0].Started
	}
	res := w.result(call, j.attempt, ev)
	res.IsError = true
	res.Class, res.Code = envelope.ClassTransient, classify.CodeDeadline
	res.Content = envelope.Text(classify.ExpiredMessage(call.Tool, ev.QueueWait))
	if !w.answer(j, v, settle.Settlement{Letter: &entry, LetterID: call.Key}, res) {
		return
	}
	log.Warn("call expired before it started; dead-lettered")
	ev.Outcome, ev.DLQReason, ev.Class, ev.Code = v.Fate, v.Reason, envelope.ClassTransient, classify.CodeDeadline
	w.cfg.Metrics.Observe(ev)
}
