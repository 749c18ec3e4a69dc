package worker

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// resultMsg is a result's message with its header: the map and the one
// value of its Nats-Msg-Id, reused through resultMsgs.
type resultMsg struct {
	msg nats.Msg
	id  [1]string
}

// resultMsgs holds the result messages not in use. A synchronous publish
// holds on to neither the message nor its header once it returns (the
// client encodes them as it sends), so each is reused.
var resultMsgs = sync.Pool{New: func() any {
	rm := &resultMsg{}
	rm.msg.Header = nats.Header{nats.MsgIdHdr: rm.id[:]}
	return rm
}}

// publishResultData publishes an encoded result of call to its caller and
// waits for its PubAck: on the worker's connection once it started, with
// the worker's own reply subscription (resultAcks) or else as a request
// (publishSync), the PubAck recognised without decoding it either way;
// through Config.JetStream before Start. The message id is the result
// subject's tail (jetstream.ResultMsgID is <instance>.<key>), so it costs
// no string of its own.
func (w *Worker) publishResultData(call *envelope.Call, data []byte) error {
	subject := jetstream.ResultSubject(call.ReplyTo, call.Key)
	rm := resultMsgs.Get().(*resultMsg)
	rm.msg.Subject, rm.msg.Data, rm.id[0] = subject, data, subject[len(jetstream.ResultSubjectPrefix):]
	var err error
	switch ctx := w.publishContext(time.Now()); {
	case w.acks != nil:
		err = w.acks.publish(ctx, &rm.msg)
	case w.nc != nil:
		err = publishSync(ctx, w.nc, &rm.msg)
	default:
		_, err = w.js.PublishMsg(ctx, &rm.msg)
	}
	rm.msg.Subject, rm.msg.Data, rm.id[0] = "", nil, ""
	resultMsgs.Put(rm)
	return err
}

// publishCtx is a context shared by the result publishes that start within
// one period (publishContext).
type publishCtx struct {
	ctx     context.Context
	cancel  context.CancelFunc // never called: its deadline releases it (a publish may start until then)
	renewAt time.Time          // when publishes stop using it
}

// publishSlices is how many contexts a PublishTimeout is cut into: the
// publishes of one period share a context, and wait between
// (1 - 1/publishSlices) × PublishTimeout and PublishTimeout for their PubAck.
const publishSlices = 10

// publishContext returns the context a result publish starting at now
// waits for its PubAck with: one context ending PublishTimeout after its
// period began, shared by every publish of the period (a tenth of
// PublishTimeout), instead of a context and a timer per result. A context
// is released when its deadline passes, not before: a call still running
// when Stop returns may publish its result with it.
func (w *Worker) publishContext(now time.Time) context.Context {
	if p := w.pubCtx.Load(); p != nil && now.Before(p.renewAt) {
		return p.ctx
	}
	w.pubCtxMu.Lock()
	defer w.pubCtxMu.Unlock()
	if p := w.pubCtx.Load(); p != nil && now.Before(p.renewAt) {
		return p.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(w.cfg.PublishTimeout))
	w.pubCtx.Store(&publishCtx{ctx: ctx, cancel: cancel, renewAt: now.Add(w.cfg.PublishTimeout / publishSlices)})
	return ctx
}

// matchResultAcks subscribes to the PubAcks of the worker's result
// publishes (resultAcks) until the worker is idle after Stop, or its
// connection closes. If it cannot, results are published as requests
// (publishSync). w.mu is held, before any pull.
func (w *Worker) matchResultAcks() {
	a, err := newResultAcks(w.nc)
	if err != nil {
		w.cfg.Logger.Warn("worker: result PubAcks go through requests", "error", err)
		return
	}
	w.acks = a
	go a.run(w.idle)
}
