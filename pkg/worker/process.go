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

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/dlq"
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

// process handles one delivery from decoding to ack or nak.
func (w *Worker) process(j *job) {
	start := time.Now()
	rt := j.served.tool
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
		if handedBack {
			// The worker is shutting down and cancelled the call: another
			// worker takes it.
			if j.settle() {
				_ = j.msg.Nak()
				ev.Outcome = OutcomeHandedBack
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

	v := rt.Retry.Fate(d, j.attempt, time.Now(), call.Deadline, w.cfg.Rand)
	switch v.Action {
	case classify.ActionRetry:
		w.recordAttempt(call, w.attemptOf(j, d, start, ev), &ev, log)
		if !j.settle() {
			return
		}
		if err := j.msg.NakWithDelay(v.Delay); err != nil {
			log.Warn("nak failed; the call is redelivered after its ack wait", "err", err)
		}
		ev.Outcome, ev.RetryDelay = OutcomeRetry, v.Delay
		log.Info("attempt failed; retrying", "class", d.Class, "code", d.Code, "delay", v.Delay)

	case classify.ActionDeadLetter:
		entry := dlq.NewEntry(dlq.ReasonExhausted, rt.Name, call.ID, j.msg.Data())
		entry.Error = d.Cause
		entry.SourceSeq = meta.Sequence.Stream
		entry.Attempts = w.recordAttempt(call, w.attemptOf(j, d, start, ev), &ev, log)
		entry.FirstFailure, entry.LastFailure = entry.Attempts[0].Started, time.Now()
		if !w.publishOrHandBack(j, log, "dead-letter", func() error { return w.publishDLQ(&entry, call.Key) }) {
			return
		}
		res := w.errorResult(call, d, j.attempt, true, false, ev)
		if !w.reply(j, call, res, log) {
			return
		}
		ev.Outcome, ev.DLQReason = OutcomeDeadLetter, dlq.ReasonExhausted
		log.Warn("attempts exhausted; call dead-lettered", "class", d.Class, "code", d.Code)

	default: // ActionReply
		var res *envelope.Result
		if d.Class == envelope.ClassNone {
			res = w.result(call, j.attempt, ev)
			res.Content = out.Content.Truncate(w.cfg.Limits.MaxContentBytes)
			ev.Outcome = OutcomeSuccess
		} else {
			res = w.errorResult(call, d, j.attempt, false, v.GaveUp, ev)
			ev.Outcome = OutcomeError
			log.Info("call failed", "class", d.Class, "code", d.Code, "gave_up_for_deadline", v.GaveUp)
		}
		if !w.reply(j, call, res, log) {
			return
		}
		if ev.Outcome == OutcomeError { // recorded after the reply: it does not delay the result
			w.recordAttempt(call, w.attemptOf(j, d, start, ev), &ev, log)
		}
	}
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
	ctx, cancel := context.WithTimeoutCause(w.ctx, timeout, &classify.TimeoutError{After: timeout})
	defer cancel()
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

// reply publishes res (when the call names an orchestrator to reply to) and
// then acks the call. It reports whether the message was settled here.
func (w *Worker) reply(j *job, call *envelope.Call, res *envelope.Result, log *slog.Logger) bool {
	if call.ReplyTo != "" {
		if !w.publishOrHandBack(j, log, "result", func() error { return w.publishResult(call, res) }) {
			return false
		}
	}
	if !j.settle() {
		return false
	}
	if err := j.msg.Ack(); err != nil {
		log.Warn("ack failed; the call may run again and its result is deduplicated", "err", err)
	}
	return true
}

// publishOrHandBack runs publish and, while it fails transiently, runs it
// again, in place, for up to PublishRetryFor, keeping the call's message
// with in-progress acks: the call already ran, and handing it back would run
// it again and count a delivery against its attempts. It reports whether
// publish got through; when it did not, the call was handed back.
func (w *Worker) publishOrHandBack(j *job, log *slog.Logger, what string, publish func() error) bool {
	err := publish()
	if err == nil {
		return true
	}
	if w.cfg.PublishRetryFor > 0 && jetstream.Transient(err) {
		log.Warn("publishing the "+what+" failed; retrying", "err", err, "retry_for", w.cfg.PublishRetryFor)
		giveUp := time.Now().Add(w.cfg.PublishRetryFor)
	retry:
		for n := 1; ; n++ {
			wait := jetstream.RepublishDelay(n)
			if time.Now().Add(wait).After(giveUp) {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-w.ctx.Done(): // shutdown: Stop hands the call back
				t.Stop()
				break retry
			}
			_ = j.msg.InProgress()
			if err = publish(); err == nil {
				log.Info("published the "+what+" after retrying", "tries", n+1)
				return true
			}
			if !jetstream.Transient(err) {
				break
			}
		}
	}
	w.retryLater(j, log, what, err)
	return false
}

// retryLater hands a message back after a publish failed: the call will run
// again (a tool that is not idempotent does not: it is answered as having
// an unknown outcome), and its result is deduplicated by call key.
func (w *Worker) retryLater(j *job, log *slog.Logger, what string, err error) {
	log.Error("publishing the "+what+" failed; handing the call back", "err", err)
	if j.settle() {
		_ = j.msg.NakWithDelay(time.Second)
	}
}

// resultBufs holds the buffers results are encoded into.
var resultBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// publishResult publishes res on the caller's result subject,
// tools.result.<reply_to>.<key>, deduplicated per instance and call key
// (jetstream.ResultMsgID), and waits for the PubAck.
func (w *Worker) publishResult(call *envelope.Call, res *envelope.Result) error {
	bp := resultBufs.Get().(*[]byte)
	defer resultBufs.Put(bp)
	data, err := envelope.AppendResult((*bp)[:0], res)
	if err != nil {
		return err
	}
	*bp = data // keep what it grew to; the publish below copies data out before it returns
	return w.publishResultData(call, data)
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
func (w *Worker) publishDLQ(e *dlq.Entry, msgID string) error {
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
	entry := dlq.NewEntry(dlq.ReasonMalformed, tool, "", j.msg.Data())
	entry.Error = decodeErr.Error()
	entry.SourceSeq = meta.Sequence.Stream
	entry.FirstFailure = time.Now()
	entry.LastFailure = entry.FirstFailure
	msgID := fmt.Sprintf("malformed-%s-%d", jetstream.StreamCalls, meta.Sequence.Stream)
	if !w.publishOrHandBack(j, log, "dead-letter", func() error { return w.publishDLQ(&entry, msgID) }) {
		return
	}
	if j.settle() {
		_ = j.msg.TermWithReason("malformed call: " + decodeErr.Error())
	}
	log.Warn("malformed call dead-lettered", "err", decodeErr)
	ev.Outcome, ev.DLQReason, ev.Class, ev.Code = OutcomeDeadLetter, dlq.ReasonMalformed, envelope.ClassValidation, "malformed"
	w.cfg.Metrics.Observe(ev)
}

// expire answers a call whose deadline passed before it started: dead letter
// with reason expired (operators may replay it), is_error to the caller.
func (w *Worker) expire(j *job, call *envelope.Call, meta *js.MsgMetadata, ev Event, log *slog.Logger) {
	entry := dlq.NewEntry(dlq.ReasonExpired, call.Tool, call.ID, j.msg.Data())
	entry.Error = "the call's deadline passed before a worker started it"
	entry.SourceSeq = meta.Sequence.Stream
	entry.FirstFailure = time.Now()
	entry.LastFailure = entry.FirstFailure
	if entry.Attempts = w.loadAttempts(call, &ev, log); len(entry.Attempts) > 0 {
		entry.FirstFailure = entry.Attempts[0].Started
	}
	if !w.publishOrHandBack(j, log, "dead-letter", func() error { return w.publishDLQ(&entry, call.Key) }) {
		return
	}
	res := w.result(call, j.attempt, ev)
	res.IsError = true
	res.Class, res.Code = envelope.ClassTransient, classify.CodeDeadline
	res.Content = envelope.Text(fmt.Sprintf(
		"The call to %s waited %s in the queue and its deadline passed before any worker could start it, so it was not run. "+
			"The tool is busy; try again later or use a different approach.", call.Tool, ev.QueueWait.Round(time.Second)))
	if !w.reply(j, call, res, log) {
		return
	}
	log.Warn("call expired before it started; dead-lettered")
	ev.Outcome, ev.DLQReason, ev.Class, ev.Code = OutcomeDeadLetter, dlq.ReasonExpired, envelope.ClassTransient, classify.CodeDeadline
	w.cfg.Metrics.Observe(ev)
}
