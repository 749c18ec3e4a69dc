package worker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// delivery is what happened to one delivery of a call, as process found
// it: the classify.Delivery the tool's policy decides on, and what
// carrying out the verdict needs. Its Decision says what went wrong in
// every case, not only after an attempt: its Class and Code are the
// delivery's metrics event's, its Cause the dead letter's error.
type delivery struct {
	classify.Delivery
	start     time.Time       // when the delivery's handling began
	out       tools.Output    // CaseAttempt, a success: the handler's output
	ran       bool            // CaseCancelled: the handler ran before the cancellation
	prior     *settle.Started // CaseStartedBefore: the attempt that never reported
	stored    []byte          // CaseStored: the stored result to hand on to the call's reply_to; nil: none
	malformed string          // CaseMalformed: the tool the message's subject names
}

// The decisions of the cases that are not attempts (delivery.Decision).
var (
	decExpired = classify.Decision{Class: envelope.ClassTransient, Code: classify.CodeDeadline,
		Cause: "the call's deadline passed before a worker started it"}
	decCancelled = classify.Decision{Code: string(classify.FateCancelled)}
)

// malformedDecision is the decision of a call message that does not
// decode.
func malformedDecision(err error) classify.Decision {
	return classify.Decision{Class: envelope.ClassValidation, Code: string(classify.FateMalformed), Cause: err.Error()}
}

// startedBeforeDecision is the decision of a call whose earlier attempt
// prior started and never reported.
func startedBeforeDecision(prior *settle.Started) classify.Decision {
	return classify.Decision{Class: envelope.ClassPermanent, Code: classify.CodeOutcomeUnknown,
		Cause: fmt.Sprintf("attempt %d started on worker %s at %s and never reported; the tool is not idempotent, so the call was not run again",
			prior.N, prior.WorkerID, prior.At.UTC().Format(time.RFC3339))}
}

// conclude is the one settle path of a delivery: the tool's policy decides
// d (classify.Policy.Decide), and everything that follows is derived from
// the verdict: the attempt recorded in the call's history, the dead
// letter, the caller's result, the message's verb (settle.Settle, through
// w.settle), then the logs and the metrics event. A delivery whose settle
// failed is handed back (storeFailed) and not observed: its fate is the
// next delivery's.
func (w *Worker) conclude(j *job, d *delivery, ev *Event, log *slog.Logger) {
	d.Now = time.Now()
	v := j.served.tool.Retry.Decide(d.Delivery, w.cfg.Rand)
	ev.Class, ev.Code = d.Decision.Class, d.Decision.Code

	var attempts []settle.Attempt
	if v.Fate == classify.FateRetry || v.Reason == classify.FateExhausted {
		// Recorded before the settle: the dead letter carries them, and the
		// next attempt may start as soon as the call is handed back.
		attempts = w.recordAttempt(j.call, w.attemptOf(j, d.Decision, d.start, *ev), ev, log)
	}
	var s settle.Settlement
	if v.DeadLetters() {
		s.Letter, s.LetterID = w.deadLetter(j, d, v, attempts, ev, log)
	}
	var ok bool
	switch {
	case v.Fate == classify.FateStored:
		s.Result = d.stored
		ok = w.settle(j, v, s)
	case v.Answers():
		if v.Fate == classify.FateError {
			log.Info("call failed", "class", d.Decision.Class, "code", d.Decision.Code, "gave_up_for_deadline", v.GaveUp)
		}
		res := w.resultOf(j, d, v, *ev)
		ok = w.answer(j, v, s, &res)
	default:
		ok = w.settle(j, v, s)
	}
	if j.tr != nil {
		w.endSpan(j, d, v, ev, ok)
	}
	if !ok {
		return
	}
	w.settled(j, d, v, ev, log)
}

// settled is what follows a settled delivery, by its verdict v: the
// attempt recorded after the reply (it does not delay the result), the
// log, and the metrics event. A hand-back for a store that failed is not
// observed: the delivery's fate is the next one's.
func (w *Worker) settled(j *job, d *delivery, v classify.Verdict, ev *Event, log *slog.Logger) {
	switch v.Fate {
	case classify.FateError:
		w.recordAttempt(j.call, w.attemptOf(j, d.Decision, d.start, *ev), ev, log)
	case classify.FateCancelled:
		if w.cfg.History != nil { // after the ack: it does not hold the message
			w.recordAttempt(j.call, settle.Attempt{
				N: j.attempt, WorkerID: w.cfg.WorkerID, Code: string(classify.FateCancelled), Message: cancelledMessage(d.ran),
				Started: d.start, Duration: ev.ExecTime, Cancelled: true,
			}, ev, log)
		}
	case classify.FateRetry:
		ev.RetryDelay = v.Delay
	}
	logVerdict(log, d, v, ev)
	if d.Case == classify.CaseStoreFailed {
		return
	}
	ev.Outcome, ev.DLQReason = v.Fate, v.Reason
	w.cfg.Metrics.Observe(*ev)
}

// logVerdict logs a settled delivery's verdict v.
func logVerdict(log *slog.Logger, d *delivery, v classify.Verdict, ev *Event) {
	switch {
	case v.Fate == classify.FateRetry:
		log.Info("attempt failed; retrying", "class", d.Decision.Class, "code", d.Decision.Code, "delay", v.Delay)
	case v.Reason == classify.FateExhausted:
		log.Warn("attempts exhausted; call dead-lettered", "class", d.Decision.Class, "code", d.Decision.Code)
	case v.Reason == classify.FateMalformed:
		log.Warn("malformed call dead-lettered", "err", d.Decision.Cause)
	case v.Reason == classify.FateExpired:
		log.Warn("call expired before it started; dead-lettered")
	case v.Reason == classify.FateOutcomeUnknown:
		log.Warn("an earlier attempt of the call started and never reported; not running a tool that is not idempotent again",
			"started_attempt", d.prior.N, "started_by", d.prior.WorkerID, "started_at", d.prior.At)
	case v.Fate == classify.FateStored:
		log.Info("call answered from its stored result; not run again")
	case v.Fate == classify.FateCancelled:
		log.Info("call "+cancelledMessage(d.ran), "queue_wait", ev.QueueWait, "exec_time", ev.ExecTime)
	}
}

// cancelledMessage says when the caller cancelled the call.
func cancelledMessage(ran bool) string {
	if ran {
		return "cancelled by the caller while it ran"
	}
	return "cancelled by the caller before it ran"
}

// deadLetter is the dead letter of a delivery whose verdict v
// dead-letters it, and its Nats-Msg-Id: the call key, or a stand-in for a
// message that did not decode. It carries the call's attempts: recorded
// (the attempts that ran out), else read from the history.
func (w *Worker) deadLetter(j *job, d *delivery, v classify.Verdict, recorded []settle.Attempt, ev *Event, log *slog.Logger) (*settle.Entry, string) {
	seq := j.seq()
	if v.Reason == classify.FateMalformed {
		e := settle.NewEntry(v.Reason, d.malformed, "", j.msg.Data())
		e.Error, e.SourceSeq = d.Decision.Cause, seq
		e.FirstFailure = time.Now()
		e.LastFailure = e.FirstFailure
		return &e, fmt.Sprintf("malformed-%s-%d", jetstream.StreamCalls, seq)
	}
	call := j.call
	e := settle.NewEntry(v.Reason, call.Tool, call.ID, j.msg.Data())
	e.Error, e.SourceSeq = d.Decision.Cause, seq
	e.FirstFailure = time.Now()
	e.Attempts = recorded
	if v.Reason != classify.FateExhausted {
		e.Attempts = w.loadAttempts(call, ev, log)
	}
	if len(e.Attempts) > 0 {
		e.FirstFailure = e.Attempts[0].Started
	}
	if v.Reason == classify.FateOutcomeUnknown {
		e.Deliveries, e.FirstFailure = j.attempt, d.prior.At
	}
	e.LastFailure = time.Now()
	return &e, call.Key
}

// resultOf is the caller's result of a delivery whose verdict v answers
// it. It is returned by value: the result lives on conclude's stack.
func (w *Worker) resultOf(j *job, d *delivery, v classify.Verdict, ev Event) envelope.Result {
	call := j.call
	res := w.result(call, j.attempt, ev)
	var content string
	switch {
	case v.Fate == classify.FateSuccess:
		res.Content = d.out.Content.Truncate(w.cfg.Limits.MaxContentBytes)
		return res
	case v.Reason == classify.FateExpired:
		content = classify.ExpiredMessage(call.Tool, ev.QueueWait)
	case v.Reason == classify.FateOutcomeUnknown:
		content = classify.OutcomeUnknownMessage(call.Tool)
	default:
		w.failWith(&res, d.Decision, v.Reason == classify.FateExhausted, v.GaveUp)
		return res
	}
	res.IsError = true
	res.Class, res.Code = d.Decision.Class, d.Decision.Code
	res.Content = envelope.Text(content)
	return res
}

// result starts a result envelope for call.
func (w *Worker) result(call *envelope.Call, attempt int, ev Event) envelope.Result {
	return envelope.Result{
		CallID: call.ID, Key: call.Key, Tool: call.Tool, Attempts: attempt, WorkerID: w.cfg.WorkerID,
		QueueWait: ev.QueueWait, ExecTime: ev.ExecTime,
	}
}

// failWith makes res an is_error result carrying d and its message for
// the model.
func (w *Worker) failWith(res *envelope.Result, d classify.Decision, exhausted, gaveUp bool) {
	var timeout time.Duration
	if rt, _ := w.cfg.Registry.Lookup(res.Tool); rt != nil {
		timeout = rt.Timeout
	}
	res.IsError = true
	res.Class, res.Code, res.Retryable, res.RetryAfter = d.Class, d.Code, d.Retryable, d.RetryAfter
	res.Content = envelope.Text(d.Message(classify.MessageInput{
		Tool: res.Tool, Attempts: res.Attempts, Timeout: timeout, Exhausted: exhausted, GaveUp: gaveUp,
	}))
}
