package dlq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestReplayCall(t *testing.T) {
	t.Parallel()
	e := settle.NewEntry(classify.FateExhausted, "echo", "toolu_1", callData(t, "toolu_1", "echo", `{"text":"x"}`, "orch-1"))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c, err := dlq.ReplayCall(&e, 42, now, time.Minute, "", envelope.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "toolu_1-r42" || c.OriginalID != "toolu_1" || c.ReplyTo != "" || !c.CreatedAt.Equal(now) ||
		!c.Deadline.Equal(now.Add(time.Minute)) || c.Tool != "echo" || string(c.Input) != `{"text":"x"}` {
		t.Errorf("replayed call = %+v", c)
	}
	// A replay dead-lettered again keeps the first id as its original.
	data, _ := envelope.EncodeCall(c)
	again := settle.NewEntry(classify.FateExhausted, "echo", c.ID, data)
	c2, err := dlq.ReplayCall(&again, 50, now, time.Minute, "replay-x", envelope.Limits{})
	if err != nil || c2.ID != "toolu_1-r50" || c2.OriginalID != "toolu_1" || c2.ReplyTo != "replay-x" {
		t.Errorf("second replay = %+v, %v", c2, err)
	}
	bad := settle.NewEntry(classify.FateMalformed, "echo", "", []byte("\x00garbage"))
	if _, err := dlq.ReplayCall(&bad, 7, now, time.Minute, "", envelope.Limits{}); !errors.Is(err, dlq.ErrNotReplayable) {
		t.Errorf("replaying a malformed call: %v, want ErrNotReplayable", err)
	}
}

// callsOn returns the calls queued in TOOL_CALLS for tool, by id, with
// the Nats-Msg-Id of each.
func callsOn(t *testing.T, j js.JetStream, tool string) map[string]*envelope.Call {
	t.Helper()
	s, err := j.Stream(ctxFor(t), jetstream.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*envelope.Call{}
	info, _ := s.Info(ctxFor(t))
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctxFor(t), seq)
		if err != nil || m.Subject != jetstream.CallSubject(tool) {
			continue
		}
		c, err := envelope.DecodeCall(m.Data, envelope.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(nats.MsgIdHdr) != c.Key || c.Key != c.CallKey() {
			t.Errorf("call %s published with Nats-Msg-Id %q, key %q; want its call key", c.ID, m.Header.Get(nats.MsgIdHdr), c.Key)
		}
		out[c.ID] = c
	}
	return out
}

func TestReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	ids := []string{newID(), newID(), newID()}
	var seqs []uint64
	for _, id := range ids {
		seqs = append(seqs, deadLetter(t, b.js, classify.FateExhausted, "echo", id))
	}
	bad := settle.NewEntry(classify.FateMalformed, "echo", "", []byte("\x00garbage"))
	m, _ := bad.Msg(jetstream.DLQSubject("echo"), "malformed-1")
	ack, err := b.js.PublishMsg(ctxFor(t), m)
	if err != nil {
		t.Fatal(err)
	}
	badSeq := ack.Sequence

	// Dry run: reports, changes nothing.
	var reports []dlq.Replayed
	n, err := s.Replay(ctxFor(t), append(seqs, badSeq), dlq.ReplayConfig{DryRun: true}, func(r dlq.Replayed) { reports = append(reports, r) })
	if err != nil || n != 0 || len(reports) != 4 {
		t.Fatalf("dry run: %d replayed, %d reports, %v", n, len(reports), err)
	}
	if reports[0].NewID != dlq.ReplayID(ids[0], seqs[0]) || reports[0].Err != nil || !errors.Is(reports[3].Err, dlq.ErrNotReplayable) {
		t.Errorf("dry-run reports = %+v", reports)
	}
	if got := len(callsOn(t, b.js, "echo")); got != 0 || streamMsgs(t, b.js, jetstream.StreamDLQ) != 4 {
		t.Fatalf("dry run published %d calls or removed dead letters", got)
	}

	// A crash after publishing the first replay and before removing its
	// dead letter: the same id is already in TOOL_CALLS.
	first, _ := s.Get(ctxFor(t), seqs[0])
	c, _ := dlq.ReplayCall(first.Entry, seqs[0], time.Now(), time.Minute, "", envelope.Limits{})
	data, _ := envelope.EncodeCall(c)
	pm := nats.NewMsg(jetstream.CallSubject("echo"))
	pm.Data = data
	pm.Header.Set(nats.MsgIdHdr, c.Key)
	if _, err := b.js.PublishMsg(ctxFor(t), pm); err != nil {
		t.Fatal(err)
	}

	reports = nil
	n, err = s.Replay(ctxFor(t), append(seqs, badSeq, 9999), dlq.ReplayConfig{Rate: 1000}, func(r dlq.Replayed) { reports = append(reports, r) })
	if err != nil || n != 3 {
		t.Fatalf("Replay = %d, %v; want 3", n, err)
	}
	if !reports[0].Duplicate || reports[1].Duplicate {
		t.Errorf("duplicate flags = %v, %v; want the first only", reports[0].Duplicate, reports[1].Duplicate)
	}
	if !errors.Is(reports[3].Err, dlq.ErrNotReplayable) || !errors.Is(reports[4].Err, dlq.ErrNotFound) {
		t.Errorf("skips = %v, %v", reports[3].Err, reports[4].Err)
	}
	calls := callsOn(t, b.js, "echo")
	if len(calls) != 3 {
		t.Errorf("TOOL_CALLS holds %d replayed calls, want 3 (one per dead letter)", len(calls))
	}
	for i, id := range ids {
		c := calls[dlq.ReplayID(id, seqs[i])]
		if c == nil || c.OriginalID != id || c.ReplyTo != "" {
			t.Errorf("replay of %s = %+v", id, c)
		}
	}
	// Only the malformed letter is left.
	left, _ := s.List(ctxFor(t), dlq.Filter{})
	if got := seqsOf(left); len(got) != 1 || got[0] != badSeq {
		t.Errorf("left in TOOL_DLQ: %v, want [%d]", got, badSeq)
	}
}

// A publish failure stops Replay and keeps the dead letter.
func TestReplayKeepsLetterWhenPublishFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	// No stream takes tools.call.* for this tool when TOOL_CALLS refuses
	// the message: a message larger than its MaxMsgSize.
	big := make([]byte, jetstream.MaxMsgSizeDefault)
	for i := range big {
		big[i] = 'a'
	}
	id := newID()
	e := settle.NewEntry(classify.FateExhausted, "echo", id, callData(t, id, "echo", `{"text":"`+string(big)+`"}`, ""))
	m, _ := e.Msg(jetstream.DLQSubject("echo"), id)
	ack, err := b.js.PublishMsg(ctxFor(t), m)
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Bool
	_, err = s.Replay(ctxFor(t), []uint64{ack.Sequence}, dlq.ReplayConfig{Limits: envelope.Limits{MaxInputBytes: 4 << 20}},
		func(r dlq.Replayed) { failed.Store(r.Err != nil) })
	if err == nil || !failed.Load() {
		t.Fatalf("Replay of a call TOOL_CALLS refuses: err %v", err)
	}
	if _, err := s.Get(ctxFor(t), ack.Sequence); err != nil {
		t.Errorf("the dead letter is gone after a failed republish: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Replay(ctx, []uint64{ack.Sequence}, dlq.ReplayConfig{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Replay with a cancelled context: %v", err)
	}
}
