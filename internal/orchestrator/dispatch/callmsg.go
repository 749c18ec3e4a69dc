package dispatch

import (
	"sync"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// callMsg is a call's message to TOOL_CALLS: the message, its headers and
// the encoded call, reused from one call to the next. A callMsg goes back
// to the pool only when nothing else can hold it: it was never handed to
// nats.go, or its one publish was acknowledged (nats.go has forgotten the
// publish then, and publishes it no more). A message published again, or
// left behind by a turn that ended before its PubAck, is left to the
// garbage collector.
type callMsg struct {
	msg nats.Msg
	// id and tp back the values of the Nats-Msg-Id and traceparent
	// headers.
	id, tp [1]string
	buf    []byte // room for the encoded call: msg.Data
}

// callMsgs holds the callMsgs free for reuse.
var callMsgs = sync.Pool{New: func() any {
	return &callMsg{msg: nats.Msg{Header: make(nats.Header, 3)}}
}}

// getCallMsg returns a callMsg with room for the call's encoding.
func getCallMsg() *callMsg { return callMsgs.Get().(*callMsg) }

// putCallMsg gives m back for reuse. An unusually large encoding's buffer
// is not kept: one large input would otherwise pin its memory.
func putCallMsg(m *callMsg) {
	if cap(m.buf) > maxPooledCall {
		m.buf = nil
	}
	m.msg.Data = nil
	callMsgs.Put(m)
}

// maxPooledCall is the largest buffer a pooled callMsg keeps.
const maxPooledCall = 16 << 10

// encode encodes c, which has no key, into m's buffer and returns the
// call's key (envelope.CallKey), which the encoder derives: given a key, it
// would hash the call again to check it.
func (m *callMsg) encode(c *envelope.Call) (string, error) {
	b, err := envelope.AppendCall(m.buf[:0], c)
	if err != nil {
		return "", err
	}
	m.buf = b
	return c.Key, nil
}

// address makes m the message of a call to tool with Nats-Msg-Id msgID
// and trace context traceparent; progress asks the worker for the call's
// progress (jetstream.HeaderProgress).
func (m *callMsg) address(tool, msgID, traceparent string, progress bool) *nats.Msg {
	if s := m.msg.Subject; len(s) != len(jetstream.CallSubjectPrefix)+len(tool) || s[len(jetstream.CallSubjectPrefix):] != tool {
		m.msg.Subject = jetstream.CallSubject(tool) // a tool this buffer's last call was not to
	}
	m.id[0], m.tp[0] = msgID, traceparent
	h := m.msg.Header
	clear(h) // a re-post may have set another Msg-Id slice
	h[js.MsgIDHeader] = m.id[:]
	h[envelope.HeaderTraceparent] = m.tp[:]
	if progress {
		h[jetstream.HeaderProgress] = progressAsked
	}
	m.msg.Data = m.buf
	return &m.msg
}
