package worker

import (
	"context"
	"errors"
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

// lookUpStored looks up the call's stored result in TOOL_RESULTS and
// reports whether the delivery ends there: the call has its result
// (classify.CaseStored), or the look-up failed for a tool that is not
// idempotent (classify.CaseStoreFailed). A stored result published for
// another orchestrator instance (the call was re-posted to this one) is
// handed on to the call's reply_to. A stored transient error stored before
// this call message was published is not used: it is the answer of an
// earlier message of the same call (a re-post after the duplicate window),
// it says that one did not get through, and this is the retry. A look-up
// that fails is logged; the call then runs as usual if its tool is
// idempotent, and is handed back otherwise: it may have run already (its
// ack lost in a server restart), and a tool that is not idempotent is not
// started again without the look-up.
func (w *Worker) lookUpStored(j *job, meta *js.MsgMetadata, d *delivery, log *slog.Logger) bool {
	call, idempotent := j.call, j.served.tool.Idempotent
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
		d.Case = classify.CaseStoreFailed
		return true
	}
	if m.Time.Before(meta.Timestamp) {
		if res, err := envelope.DecodeResult(m.Data); err != nil || res.Class == envelope.ClassTransient {
			return false
		}
	}
	d.Case = classify.CaseStored
	if call.ReplyTo != "" && m.Subject != jetstream.ResultSubject(call.ReplyTo, call.Key) {
		d.stored = m.Data // stored for another orchestrator instance: hand it on
	}
	return true
}

// begin marks the start of this attempt of a call of a tool that is not
// idempotent, and reports whether the tool may run. It may not when an
// earlier attempt started and never reported (classify.CaseStartedBefore:
// the call is answered with outcome unknown), or when the mark cannot be
// written (classify.CaseStoreFailed: the call is handed back without
// running; it is never started unmarked).
func (w *Worker) begin(j *job, meta *js.MsgMetadata, d *delivery, ev *Event, log *slog.Logger) bool {
	call := j.call
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.HistoryTimeout)
	defer cancel()
	prior, err := w.cfg.History.Begin(ctx, call.Key, settle.Started{
		Seq: meta.Sequence.Stream, N: j.attempt, WorkerID: w.cfg.WorkerID, At: time.Now(),
		Token: strconv.FormatUint(rand.Uint64(), 36),
	}, call.Deadline)
	switch {
	case err != nil:
		ev.HistoryFailed = true
		log.Error("publishing the start marker failed; handing the call back", "err", err)
		d.Case = classify.CaseStoreFailed
		return false
	case prior != nil:
		d.Case, d.Decision, d.prior = classify.CaseStartedBefore, startedBeforeDecision(prior), prior
		return false
	}
	return true
}

// startedBefore makes d, the delivery of an expired call of a tool that is
// not idempotent, classify.CaseStartedBefore (outcome unknown) when an
// earlier delivery of it started and never reported (this delivery has
// not begun, so any marker is an earlier one's, also of a delivery a
// killed NATS server handed out again with the same delivery count). A
// marker that cannot be read counts as none: the call is not run either
// way (its deadline passed).
func (w *Worker) startedBefore(j *job, d *delivery, ev *Event) {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.HistoryTimeout)
	defer cancel()
	prior, err := w.cfg.History.StartedOf(ctx, j.call.Key)
	if err != nil {
		ev.HistoryFailed = true
		return
	}
	if prior != nil {
		d.Case, d.Decision, d.prior = classify.CaseStartedBefore, startedBeforeDecision(prior), prior
	}
}
