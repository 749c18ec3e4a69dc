package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// failJS refuses every publish.
type failJS struct{ js.JetStream }

func (failJS) PublishMsg(context.Context, *nats.Msg, ...js.PublishOpt) (*js.PubAck, error) {
	return nil, errors.New("no stream")
}

// verbMsg is a delivered call message that records its verbs.
type verbMsg struct {
	benchMsg
	verbs []string
	delay time.Duration
}

func (m *verbMsg) Ack() error { m.verbs = append(m.verbs, "ack"); return nil }
func (m *verbMsg) Nak() error { m.verbs = append(m.verbs, "nak"); return nil }
func (m *verbMsg) NakWithDelay(d time.Duration) error {
	m.verbs, m.delay = append(m.verbs, "nak-delay"), d
	return nil
}

// A result whose publish fails hands the call back after the delay the
// tool's policy gives (classify.CaseStoreFailed: its base delay), and the
// delivery is not observed: its fate is the next delivery's.
func TestFailedPublishHandsBackAfterPolicyDelay(t *testing.T) {
	t.Parallel()
	echo := demo.Echo()
	echo.Retry.BaseDelay = 3 * time.Second
	reg := tools.NewRegistry()
	if err := reg.Register(echo); err != nil {
		t.Fatal(err)
	}
	metrics := &countingMetrics{}
	w, err := New(Config{
		JetStream: failJS{}, Registry: reg, WorkerID: "w1", PublishRetryFor: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.pool.close) // the handler's goroutine
	rt, _ := reg.Lookup(echo.Name)
	now := time.Now()
	data, err := envelope.EncodeCall(&envelope.Call{
		ID: "toolu_1", Tool: echo.Name, Input: []byte(`{"text":"hi"}`), ReplyTo: "orch", CreatedAt: now, Deadline: now.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := &verbMsg{benchMsg: benchMsg{data: data, meta: js.MsgMetadata{
		Sequence: js.SequencePair{Stream: 7, Consumer: 1}, NumDelivered: 1, Timestamp: now,
	}}}
	w.process(&job{msg: msg, served: &served{tool: rt, heartbeat: 10 * time.Second}})
	if len(msg.verbs) != 1 || msg.verbs[0] != "nak-delay" || msg.delay != 3*time.Second {
		t.Errorf("verbs %v, delay %v; want one NAK after the tool's base delay (3s)", msg.verbs, msg.delay)
	}
	if metrics.n != 0 {
		t.Errorf("%d events observed for a delivery handed back; want none", metrics.n)
	}
}
