package worker

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// resultMsg is a result's message and the one value of its Nats-Msg-Id
// header, in one allocation.
type resultMsg struct {
	msg nats.Msg
	id  [1]string
}

// publishResultData publishes an encoded result of call to its caller and
// waits for its PubAck. The message id is the result subject's tail
// (jetstream.ResultMsgID is <instance>.<key>), so it costs no string of
// its own.
func (w *Worker) publishResultData(call *envelope.Call, data []byte) error {
	subject := jetstream.ResultSubject(call.ReplyTo, call.Key)
	rm := &resultMsg{}
	rm.id[0] = subject[len(jetstream.ResultSubjectPrefix):]
	rm.msg = nats.Msg{Subject: subject, Data: data, Header: nats.Header{nats.MsgIdHdr: rm.id[:]}}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.PublishTimeout)
	defer cancel()
	_, err := w.js.PublishMsg(ctx, &rm.msg)
	return err
}
