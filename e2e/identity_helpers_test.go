package e2e_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

const (
	outcomeStored      = classify.FateStored
	codeOutcomeUnknown = classify.CodeOutcomeUnknown
)

// resultMsg is the message a worker publishes with a successful result of
// call, of content text.
func resultMsg(t *testing.T, call *envelope.Call, text string) *nats.Msg {
	t.Helper()
	data, err := envelope.EncodeResult(&envelope.Result{CallID: call.ID, Key: call.Key, Tool: call.Tool, Content: envelope.Text(text), Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(jetstream.ResultSubject(call.ReplyTo, call.Key))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, jetstream.ResultMsgID(call.ReplyTo, call.Key))
	return m
}
