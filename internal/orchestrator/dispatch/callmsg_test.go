package dispatch

import (
	"testing"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// A reused call message carries only its own call's subject, headers and
// payload.
func TestCallMsgReuse(t *testing.T) {
	t.Parallel()
	m := callMsgs.New().(*callMsg)
	call := envelope.Call{ID: "toolu_1", Tool: "echo", Input: []byte(`{"a":1}`), Tenant: "t", Session: "s"}
	key, err := m.encode(&call)
	if err != nil {
		t.Fatal(err)
	}
	if want := envelope.CallKey("t", "s", "toolu_1", "echo", []byte(`{"a":1}`)); key != want {
		t.Fatalf("key %q, want %q", key, want)
	}
	msg := m.address("echo", "key1", "tp1", true)
	if msg.Subject != jetstream.CallSubject("echo") || msg.Header.Get(js.MsgIDHeader) != "key1" ||
		msg.Header.Get(envelope.HeaderTraceparent) != "tp1" || msg.Header.Get(jetstream.HeaderProgress) != "1" {
		t.Fatalf("first message: %s %v", msg.Subject, msg.Header)
	}
	msg.Header.Set(js.MsgIDHeader, "key1.r7") // a re-post
	if _, err := m.encode(&envelope.Call{ID: "toolu_2", Tool: "sleep", Input: []byte(`{"ms":1}`)}); err != nil {
		t.Fatal(err)
	}
	msg = m.address("sleep", "key2", "tp2", false)
	if msg.Subject != jetstream.CallSubject("sleep") || msg.Header.Get(js.MsgIDHeader) != "key2" ||
		msg.Header.Get(envelope.HeaderTraceparent) != "tp2" || len(msg.Header) != 2 {
		t.Fatalf("reused message: %s %v", msg.Subject, msg.Header)
	}
	c, err := envelope.DecodeCall(msg.Data, envelope.DefaultLimits)
	if err != nil || c.ID != "toolu_2" || string(c.Input) != `{"ms":1}` {
		t.Fatalf("reused payload: %+v, %v", c, err)
	}
}
