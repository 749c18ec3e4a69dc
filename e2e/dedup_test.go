package e2e_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// slowCounter is a tool that counts its executions and takes a moment, so
// that repeated calls overlap with the first one.
func slowCounter(execs *atomic.Int64) tools.Tool {
	return tools.Tool{
		Name:        "charge_card",
		Description: "must not run twice for one call",
		InputSchema: anySchema,
		Timeout:     5 * time.Second,
		Retry:       fastRetry,
		Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			n := execs.Add(1)
			select {
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
				return tools.Output{}, ctx.Err()
			}
			if n > 1 {
				return tools.Text("charged again"), nil
			}
			return tools.Text("charged"), nil
		},
	}
}

// The same tool_use id dispatched twice (at the same time, and again after
// the first finished) runs once and has one result.
func TestDuplicateDispatchRunsOnce(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	p := newPool(t, slowCounter(&execs))
	p.startWorker()
	b := toolUse("charge_card", `{"amount":5}`)

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	first := p.dispatchAsync(ctx, b)
	second := p.dispatchAsync(ctx, b)
	results := []envelope.Result{await(t, first)[0], await(t, second)[0]}
	results = append(results, p.callBlock(b)) // after the first finished

	for i, r := range results {
		if r.IsError || r.CallID != b.ID || r.Content.Text() != "charged" {
			t.Errorf("dispatch %d: result %+v; want %q for %s", i+1, r, "charged", b.ID)
		}
	}
	if n := execs.Load(); n != 1 {
		t.Errorf("executions = %d, want 1", n)
	}
	if n := streamState(t, p.js, jetstream.StreamCalls).LastSeq; n != 1 {
		t.Errorf("TOOL_CALLS stored %d calls, want 1", n)
	}
	// A duplicate's answer may come from the core NATS watch on the
	// result's subject, which sees the worker's publish before the stream
	// has stored it: wait for the store, then count.
	eventually(t, "the result to be stored", func() bool { return len(streamMsgs(t, p.js, jetstream.StreamResults, "")) > 0 })
	if n := len(streamMsgs(t, p.js, jetstream.StreamResults, "")); n != 1 {
		t.Errorf("TOOL_RESULTS holds %d results, want 1", n)
	}
}

// A call message published twice by hand with the same Nats-Msg-Id (a
// publisher retrying after a lost PubAck) is stored once, runs once and has
// one result.
func TestDuplicatePublishRunsOnce(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	p := newPool(t, slowCounter(&execs))
	p.startWorker()

	const instance = "raw-publisher"
	id := newCallID()
	data, err := envelope.EncodeCall(&envelope.Call{
		V: envelope.Version, ID: id, Tool: "charge_card", Input: json.RawMessage(`{"amount":5}`),
		ReplyTo: instance, CreatedAt: time.Now(), Deadline: time.Now().Add(waitLong),
	})
	if err != nil {
		t.Fatal(err)
	}
	publish := func() bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m := nats.NewMsg(jetstream.CallSubject("charge_card"))
		m.Data = data
		m.Header.Set(nats.MsgIdHdr, id)
		ack, err := p.js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		return ack.Duplicate
	}

	if publish() {
		t.Fatal("the first publish was taken for a duplicate")
	}
	if !publish() {
		t.Error("the second publish, while the call runs, was not recognised as a duplicate")
	}
	resultSubject := jetstream.ResultFilter(instance)
	eventually(t, "the result", func() bool { return len(streamMsgs(t, p.js, jetstream.StreamResults, resultSubject)) > 0 })
	if !publish() {
		t.Error("the third publish, after the call ran, was not recognised as a duplicate")
	}

	// The stream stored the call once (LastSeq below), so no duplicate can
	// run; a later call shows the worker is still serving.
	if r := p.call("charge_card", `{"amount":1}`); r.IsError {
		t.Fatalf("a later call failed: %+v", r)
	}
	if n := execs.Load(); n != 2 {
		t.Errorf("executions = %d, want 2 (the duplicated call once, the later call once)", n)
	}
	if n := streamState(t, p.js, jetstream.StreamCalls).LastSeq; n != 2 {
		t.Errorf("TOOL_CALLS stored %d calls, want 2", n)
	}
	msgs := streamMsgs(t, p.js, jetstream.StreamResults, resultSubject)
	if len(msgs) != 1 {
		t.Fatalf("TOOL_RESULTS holds %d results for the call, want 1", len(msgs))
	}
	r, err := envelope.DecodeResult(msgs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	if r.CallID != id || r.IsError || r.Content.Text() != "charged" {
		t.Errorf("result %+v; want %q for %s", r, "charged", id)
	}
}
