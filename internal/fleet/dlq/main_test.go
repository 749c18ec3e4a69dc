package dlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared and the tests run with -race.
const waitLong = 60 * time.Second

// bundle is a provisioned server and a client connection.
type bundle struct {
	srv *embedded.Server
	nc  *nats.Conn
	js  js.JetStream
}

func setup(t *testing.T) *bundle {
	t.Helper()
	srv, nc, j := natstest.StartProvisioned(t)
	return &bundle{srv: srv, nc: nc, js: j}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

var idSeq atomic.Int64

// newID returns a call id unique in the test binary.
func newID() string { return fmt.Sprintf("toolu_dlqtest_%05d", idSeq.Add(1)) }

// callData encodes a call to tool with input.
func callData(t *testing.T, id, tool, input, replyTo string) []byte {
	t.Helper()
	now := time.Now()
	data, err := envelope.EncodeCall(&envelope.Call{
		V: envelope.Version, ID: id, Tool: tool, Input: json.RawMessage(input),
		ReplyTo: replyTo, CreatedAt: now, Deadline: now.Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// deadLetter stores an entry for a call to tool in TOOL_DLQ and returns its
// sequence.
func deadLetter(t *testing.T, j js.JetStream, reason classify.Fate, tool, id string, attempts ...settle.Attempt) uint64 {
	t.Helper()
	e := settle.NewEntry(reason, tool, id, callData(t, id, tool, `{"text":"`+id+`"}`, ""))
	e.Error = "the downstream is down"
	e.Attempts = attempts
	e.FirstFailure, e.LastFailure = time.Now(), time.Now()
	m, err := e.Msg(jetstream.DLQSubject(tool), id)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := j.PublishMsg(ctxFor(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// streamMsgs returns the number of messages in stream.
func streamMsgs(t *testing.T, j js.JetStream, stream string) uint64 {
	t.Helper()
	s, err := j.Stream(ctxFor(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// eventually polls cond until it holds or waitLong passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, waitLong, what, cond)
}

func seqsOf(ls []*dlq.Letter) []uint64 {
	out := make([]uint64, len(ls))
	for i, l := range ls {
		out[i] = l.Seq
	}
	return out
}

// openHistory opens the attempts bucket with its defaults.
func openHistory(t *testing.T, j js.JetStream) *settle.History {
	t.Helper()
	h, err := settle.OpenHistory(ctxFor(t), j, settle.HistoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}
