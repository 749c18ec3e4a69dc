package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// errClaimed is the error of a verb of a job whose message was settled
// elsewhere already (Stop handed it back).
var errClaimed = errors.New("worker: the call message was settled elsewhere")

// settle carries out v for j through settle.Settle and reports whether the
// message was settled here: then the caller observes the delivery's event.
// When a publish fails (after the retries in place), the call is handed
// back for a later delivery (classify.CaseStoreFailed) and settle reports
// false: the delivery's fate is that of the next one.
func (w *Worker) settle(j *job, v classify.Verdict, s settle.Settlement) bool {
	s.Verdict = v
	err := settle.Settle(context.Background(), j, s)
	if err == nil {
		return true
	}
	return w.settleFailed(j, v, err)
}

// resultBufs holds the buffers results are encoded into.
var resultBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// answer is settle for a verdict that answers the caller with res, encoded
// here into a pooled buffer (the publish copies it out before it returns).
// A call with no orchestrator to reply to is not encoded.
func (w *Worker) answer(j *job, v classify.Verdict, s settle.Settlement, res *envelope.Result) bool {
	if j.call.ReplyTo == "" {
		return w.settle(j, v, s)
	}
	bp := resultBufs.Get().(*[]byte)
	defer resultBufs.Put(bp)
	data, err := envelope.AppendResult((*bp)[:0], res)
	if err != nil {
		w.storeFailed(j, "result", err)
		return false
	}
	*bp = data // keep what it grew to
	s.Result = data
	return w.settle(j, v, s)
}

// settleFailed is settle after settle.Settle returned err.
func (w *Worker) settleFailed(j *job, v classify.Verdict, err error) bool {
	var pe *settle.PublishError
	switch {
	case errors.As(err, &pe):
		w.storeFailed(j, pe.What, pe.Err)
		return false
	case errors.Is(err, errClaimed):
		return false
	case v.Requeues():
		j.logger().Warn("nak failed; the call is redelivered after its ack wait", "err", err)
	case v.Terminates():
	default:
		j.logger().Warn("ack failed; the call may run again and its result is deduplicated", "err", err)
	}
	return true
}

// storeFailed hands the call back after what it needed written or read in
// JetStream (what) could not be: the call will run again (a tool that is
// not idempotent does not: it is answered as having an unknown outcome),
// and its result is deduplicated by call key. The delay comes from the
// tool's policy (classify.CaseStoreFailed).
func (w *Worker) storeFailed(j *job, what string, err error) {
	j.logger().Error("publishing the "+what+" failed; handing the call back", "err", err)
	w.handBackFor(j, classify.CaseStoreFailed, j.attempt)
}

// giveBack hands the call back at once, the worker being stopping
// (classify.CaseShutdown), and reports whether it was settled here.
// attempt is the delivery's number.
func (w *Worker) giveBack(j *job, attempt int) bool {
	return w.handBackFor(j, classify.CaseShutdown, attempt)
}

// handBackFor settles j with the verdict of c, a case that hands the call
// back.
func (w *Worker) handBackFor(j *job, c classify.Case, attempt int) bool {
	v := j.served.tool.Retry.Decide(classify.Delivery{Case: c, Attempt: attempt}, w.cfg.Rand)
	return w.settle(j, v, settle.Settlement{})
}

// logger is the job's logger, for the rare logs of its settling: its
// call's (callLog, kept in the job) once the message decoded, else one made
// when it logs.
func (j *job) logger() *slog.Logger {
	if j.call != nil {
		return &j.log // callLog made it once the message decoded
	}
	return j.w.cfg.Logger.With(slog.String("tool", j.served.tool.Name), slog.Uint64("stream_seq", j.seq()))
}

// The verbs of a job's message, as settle.Settle uses them (settle.Message). A
// verb settles the message only if nothing else did (Stop): then it
// returns errClaimed.
var _ settle.Message = (*job)(nil)

// PublishDeadLetter publishes e, retrying in place (publishInPlace).
func (j *job) PublishDeadLetter(_ context.Context, e *settle.Entry, id string) error {
	return j.w.publishInPlace(j, "dead letter", func() error { return j.w.publishDLQ(e, id) })
}

// PublishResult publishes the encoded result to the call's caller,
// retrying in place (publishInPlace). A call that names no orchestrator to
// reply to publishes nothing.
func (j *job) PublishResult(_ context.Context, data []byte) error {
	call := j.call
	if call == nil || call.ReplyTo == "" {
		return nil
	}
	return j.w.publishInPlace(j, "result", func() error { return j.w.publishResultData(call, data) })
}

// Ack acks the message.
func (j *job) Ack(context.Context) error {
	if !j.settle() {
		return errClaimed
	}
	return j.msg.Ack()
}

// Nak hands the message back: at once (a plain NAK) for delay 0, else
// after delay.
func (j *job) Nak(_ context.Context, delay time.Duration) error {
	if !j.settle() {
		return errClaimed
	}
	if delay <= 0 {
		return j.msg.Nak()
	}
	return j.msg.NakWithDelay(delay)
}

// Term terminates the message with reason.
func (j *job) Term(_ context.Context, reason string) error {
	if !j.settle() {
		return errClaimed
	}
	return j.msg.TermWithReason(reason)
}

// publishInPlace runs publish and, while it fails transiently, runs it
// again, in place, for up to PublishRetryFor, keeping the call's message
// with in-progress acks: the call already ran, and handing it back would run
// it again and count a delivery against its attempts. It returns the last
// error when publish did not get through (then settle hands the call back).
func (w *Worker) publishInPlace(j *job, what string, publish func() error) error {
	err := publish()
	if err == nil {
		return nil
	}
	if w.cfg.PublishRetryFor <= 0 || !jetstream.Transient(err) {
		return err
	}
	log := j.logger()
	log.Warn("publishing the "+what+" failed; retrying", "err", err, "retry_for", w.cfg.PublishRetryFor)
	giveUp := time.Now().Add(w.cfg.PublishRetryFor)
	for n := 1; ; n++ {
		wait := jetstream.RepublishDelay(n)
		if time.Now().Add(wait).After(giveUp) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.calls.Done(): // shutdown: Stop hands the call back
			t.Stop()
			return err
		}
		_ = j.msg.InProgress()
		if err = publish(); err == nil {
			log.Info("published the "+what+" after retrying", "tries", n+1)
			return nil
		}
		if !jetstream.Transient(err) {
			return err
		}
	}
}
