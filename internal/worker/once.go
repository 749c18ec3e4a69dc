package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// resultsStream returns the TOOL_RESULTS stream, looked up once.
func (w *Worker) resultsStream(ctx context.Context) (js.Stream, error) {
	w.resultsMu.Lock()
	defer w.resultsMu.Unlock()
	if w.results != nil {
		return w.results, nil
	}
	s, err := w.js.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		return nil, err
	}
	w.results = s
	return s, nil
}

// answerStored answers the call from its stored result, if TOOL_RESULTS has
// one for its key, and reports whether it did (then the message is settled
// or handed back). A stored result published for another orchestrator
// instance (the call was re-posted to this one) is handed on to the call's
// reply_to. A stored transient error stored before this call message was
// published is not used: it is the answer of an earlier message of the same
// call (a re-post after the duplicate window), it says that one did not get
// through, and this is the retry. A look-up that fails is logged; the call
// then runs as usual if its tool is idempotent, and is handed back
// otherwise: it may have run already (its ack lost in a server restart), and
// a tool that is not idempotent is not started again without the look-up.
func (w *Worker) answerStored(j *job, call *envelope.Call, meta *js.MsgMetadata, ev Event, idempotent bool, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.PublishTimeout)
	defer cancel()
	s, err := w.resultsStream(ctx)
	var m *js.RawStreamMsg
	if err == nil {
		m, err = jetstream.LastResult(ctx, s, call.Key)
	}
	switch {
	case errors.Is(err, js.ErrMsgNotFound):
		return false
	case err != nil:
		then := "running the call"
		if !idempotent {
			then = "handing the call back (its tool is not idempotent and the call may have run)"
		}
		// Once at warning level: a server that refuses every look-up (a
		// user without the permission) would otherwise flood the log.
		if w.lookupFailed.CompareAndSwap(false, true) {
			log.Warn("looking up a stored result failed; "+then+" (further failures are logged at debug level)", "err", err)
		} else {
			log.Debug("looking up a stored result failed; "+then, "err", err)
		}
		if idempotent {
			return false
		}
		w.handBackFor(j, classify.CaseStoreFailed, j.attempt)
		return true
	}
	if m.Time.Before(meta.Timestamp) {
		if res, err := envelope.DecodeResult(m.Data); err != nil || res.Class == envelope.ClassTransient {
			return false
		}
	}
	v := j.served.tool.Retry.Decide(classify.Delivery{Case: classify.CaseStored, Attempt: j.attempt}, w.cfg.Rand)
	var st settle.Settlement
	if call.ReplyTo != "" && m.Subject != jetstream.ResultSubject(call.ReplyTo, call.Key) {
		st.Result = m.Data // stored for another orchestrator instance: hand it on
	}
	if !w.settle(j, v, st) {
		return true
	}
	log.Info("call answered from its stored result; not run again")
	ev.Outcome = v.Fate
	w.cfg.Metrics.Observe(ev)
	return true
}

// begin marks the start of this attempt of a call of a tool that is not
// idempotent, and reports whether the tool may run. It may not when an
// earlier attempt started and never reported: begin answers the call with
// outcome unknown. When the mark cannot be written, the call is handed back
// without running (it is never started unmarked).
func (w *Worker) begin(j *job, call *envelope.Call, meta *js.MsgMetadata, ev *Event, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.HistoryTimeout)
	defer cancel()
	prior, err := w.cfg.History.Begin(ctx, call.Key, settle.Started{
		Seq: meta.Sequence.Stream, N: j.attempt, WorkerID: w.cfg.WorkerID, At: time.Now(),
		Token: strconv.FormatUint(rand.Uint64(), 36),
	}, call.Deadline)
	if err != nil {
		ev.HistoryFailed = true
		w.storeFailed(j, "start marker", err)
		return false
	}
	if prior != nil {
		w.outcomeUnknown(j, call, prior, *ev, log)
		return false
	}
	return true
}

// startedBefore answers a call of a tool that is not idempotent with
// outcome unknown, and reports true, when an earlier delivery of it started
// and never reported (this delivery has not begun, so any marker is an
// earlier one's, also of a delivery a killed NATS server handed out again
// with the same delivery count). A marker that cannot be read counts as none: the
// call is not run either way (its deadline passed).
func (w *Worker) startedBefore(j *job, call *envelope.Call, meta *js.MsgMetadata, ev *Event, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.HistoryTimeout)
	defer cancel()
	prior, err := w.cfg.History.StartedOf(ctx, call.Key)
	if err != nil {
		ev.HistoryFailed = true
		return false
	}
	if prior == nil {
		return false
	}
	w.outcomeUnknown(j, call, prior, *ev, log)
	return true
}

// outcomeUnknown dead-letters the call (reason outcome_unknown, for
// operators to check), answers it with an is_error of class permanent, code
// outcome_unknown, and acks it.
func (w *Worker) outcomeUnknown(j *job, call *envelope.Call, prior *settle.Started, ev Event, log *slog.Logger) {
	v := j.served.tool.Retry.Decide(classify.Delivery{Case: classify.CaseStartedBefore, Attempt: j.attempt}, w.cfg.Rand)
	entry := settle.NewEntry(v.Reason, call.Tool, call.ID, j.msg.Data())
	entry.Error = fmt.Sprintf("attempt %d started on worker %s at %s and never reported; the tool is not idempotent, so the call was not run again",
		prior.N, prior.WorkerID, prior.At.UTC().Format(time.RFC3339))
	if md, err := j.metadata(); err == nil {
		entry.SourceSeq, entry.Deliveries = md.Sequence.Stream, int(md.NumDelivered)
	}
	entry.Attempts = w.loadAttempts(call, &ev, log)
	entry.FirstFailure, entry.LastFailure = prior.At, time.Now()
	res := w.result(call, j.attempt, ev)
	res.IsError = true
	res.Class, res.Code = envelope.ClassPermanent, classify.CodeOutcomeUnknown
	res.Content = envelope.Text(classify.OutcomeUnknownMessage(call.Tool))
	if !w.answer(j, v, settle.Settlement{Letter: &entry, LetterID: call.Key}, res) {
		return
	}
	log.Warn("an earlier attempt of the call started and never reported; not running a tool that is not idempotent again",
		"started_attempt", prior.N, "started_by", prior.WorkerID, "started_at", prior.At)
	ev.Outcome, ev.Class, ev.Code, ev.DLQReason = v.Fate, envelope.ClassPermanent, classify.CodeOutcomeUnknown, v.Reason
	w.cfg.Metrics.Observe(ev)
}
