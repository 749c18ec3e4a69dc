package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// beatMsg is a delivered call message that counts its heartbeats.
type beatMsg struct {
	benchMsg
	beats atomic.Int32
}

func (m *beatMsg) InProgress() error { m.beats.Add(1); return nil }

// runOne processes one call of tool (its heartbeat every beat) and
// returns the message.
func runOne(t *testing.T, tool tools.Tool, beat time.Duration) *beatMsg {
	t.Helper()
	tool.Idempotent = true
	reg := tools.NewRegistry()
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{
		JetStream: nopJS{}, Registry: reg, WorkerID: "w1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AbandonGrace: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.pool.close)
	rt, _ := reg.Lookup(tool.Name) // idempotent, a first delivery: no stored result looked up
	now := time.Now()
	data, err := envelope.EncodeCall(&envelope.Call{
		ID: "toolu_1", Tool: tool.Name, Input: []byte(`{}`), ReplyTo: "orch", Session: "s1",
		CreatedAt: now, Deadline: now.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := &beatMsg{benchMsg: benchMsg{data: data, meta: js.MsgMetadata{
		Sequence: js.SequencePair{Stream: 3, Consumer: 1}, NumDelivered: 1, Timestamp: now,
	}}}
	w.process(&job{msg: msg, served: &served{tool: rt, heartbeat: beat}, w: w})
	return msg
}

// One timer serves a call's run: heartbeats while the handler runs longer
// than the heartbeat interval, the timeout with its cause, and nothing
// after the handler returned. The handler's context carries the call.
func TestRunTimerBeatsAndTimesOut(t *testing.T) {
	t.Parallel()
	var cause error
	var info tools.CallInfo
	var beatsAtEnd *atomic.Int32
	var atEnd int32
	msg := runOne(t, tools.Tool{
		Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`), Timeout: 300 * time.Millisecond,
		Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			info, _ = tools.CallInfoFrom(ctx)
			<-ctx.Done()
			cause = context.Cause(ctx)
			return tools.Output{}, ctx.Err()
		},
	}, 20*time.Millisecond)
	beatsAtEnd, atEnd = &msg.beats, msg.beats.Load()
	var te *classify.TimeoutError
	if !errors.As(cause, &te) || te.After != 300*time.Millisecond {
		t.Errorf("the handler's context ended with %v; want a *classify.TimeoutError after 300ms", cause)
	}
	if atEnd < 5 {
		t.Errorf("%d heartbeats in a run of 300ms with a heartbeat every 20ms; want at least 5", atEnd)
	}
	if info.ID != "toolu_1" || info.Tool != "slow" || info.Attempt != 1 || info.Session != "s1" || info.WorkerID != "w1" {
		t.Errorf("CallInfoFrom in the handler = %+v", info)
	}
	time.Sleep(100 * time.Millisecond) // five heartbeat intervals: none may come now
	if n := beatsAtEnd.Load(); n != atEnd {
		t.Errorf("%d heartbeats after the call ended", n-atEnd)
	}
}

// A call shorter than its heartbeat interval sends no heartbeat.
func TestRunTimerQuietForShortCalls(t *testing.T) {
	t.Parallel()
	msg := runOne(t, tools.Tool{
		Name: "quick", InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ok"), nil },
	}, time.Hour)
	if n := msg.beats.Load(); n != 0 {
		t.Errorf("%d heartbeats for a call shorter than its heartbeat interval", n)
	}
}

// Result publishes share a context per tenth of PublishTimeout: each waits
// at most PublishTimeout, and at least nine tenths of it.
func TestPublishContextShared(t *testing.T) {
	t.Parallel()
	w, err := New(Config{JetStream: nopJS{}, Registry: tools.NewRegistry(), PublishTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	first := w.publishContext(start)
	for _, at := range []time.Duration{0, 50 * time.Millisecond, 99 * time.Millisecond} {
		ctx := w.publishContext(start.Add(at))
		if ctx != first {
			t.Errorf("a publish %v into the period got a context of its own", at)
		}
		if d, ok := ctx.Deadline(); !ok || d.Sub(start.Add(at)) > time.Second || d.Sub(start.Add(at)) < 900*time.Millisecond {
			t.Errorf("a publish %v into the period waits %v; want between 0.9s and 1s", at, d.Sub(start.Add(at)))
		}
	}
	next := w.publishContext(start.Add(100 * time.Millisecond))
	if next == first {
		t.Error("a publish after the period shares the context of the period before")
	}
	if d, _ := next.Deadline(); d.Sub(start.Add(100*time.Millisecond)) != time.Second {
		t.Errorf("a new period's context waits %v; want 1s", d.Sub(start.Add(100*time.Millisecond)))
	}
}
