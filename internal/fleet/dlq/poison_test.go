package dlq_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func startWatcher(t *testing.T, b *bundle, history dlq.AttemptLoader, onPoison func(dlq.PoisonCall)) *dlq.PoisonWatcher {
	t.Helper()
	nc := natstest.Connect(t, b.srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return runWatcher(t, dlq.PoisonConfig{
		Conn: nc, JetStream: j, History: history, Logger: natstest.Logger(t), OnPoison: onPoison,
	})
}

// runWatcher makes and starts a watcher with cfg, stopped at the test's end.
func runWatcher(t *testing.T, cfg dlq.PoisonConfig) *dlq.PoisonWatcher {
	t.Helper()
	w, err := dlq.NewPoisonWatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return w
}

func startDispatcher(t *testing.T, j js.JetStream, tools ...string) *dispatch.Dispatcher {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{JS: j, Catalog: discovery.StaticCatalog(tools...), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) })
	return d
}

// A "worker" that takes the call and dies without a word, until the
// consumer's MaxDeliver: two watchers (two orchestrators) see the
// advisory; the call ends in TOOL_DLQ once, reason poison, with the
// history recorded so far, its caller gets one is_error result, and it is
// gone from TOOL_CALLS.
func TestPoisonWatcher(t *testing.T) {
	t.Parallel()
	b := setup(t)
	history := openHistory(t, b.js)
	var mu sync.Mutex
	var handled []dlq.PoisonCall
	for range 2 {
		startWatcher(t, b, history, func(pc dlq.PoisonCall) {
			mu.Lock()
			handled = append(handled, pc)
			mu.Unlock()
		})
	}
	// The consumer a worker would make, with a short ack wait.
	cons, err := b.js.CreateOrUpdateConsumer(ctxFor(t), jetstream.StreamCalls, js.ConsumerConfig{
		Durable: jetstream.ConsumerName("boom"), FilterSubject: jetstream.CallSubject("boom"),
		AckPolicy: js.AckExplicitPolicy, AckWait: 200 * time.Millisecond, MaxDeliver: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := startDispatcher(t, b.js, "boom")
	id := newID()
	// An attempt that failed and reported before the crashes began.
	if _, err := history.Record(ctxFor(t), envelope.CallKey("", "", id, "boom", []byte(`{"x":1}`)), settle.Attempt{N: 1, Class: envelope.ClassTransient, Code: "timeout", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		res []envelope.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := d.Dispatch(ctxFor(t), "", []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: "boom", Input: json.RawMessage(`{"x":1}`)}})
		done <- answer{res, err}
	}()
	// Take each delivery and never answer; keep pulling, as live workers
	// do (the server sends the advisory when it would deliver again).
	var a answer
	delivered := 0
	deadline := time.Now().Add(waitLong)
wait:
	for {
		select {
		case a = <-done:
			break wait
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no result for the poison call")
		}
		batch, err := cons.Fetch(1, js.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for range batch.Messages() {
			delivered++
		}
	}
	if delivered != 2 {
		t.Errorf("the call was delivered %d times, want MaxDeliver (2)", delivered)
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	res := a.res[0]
	if !res.IsError || res.Class != envelope.ClassInternal || res.Code != classify.CodePoison || res.Attempts != 2 {
		t.Errorf("result = %+v; want is_error internal poison after 2 attempts", res)
	}
	text := res.Content.Text()
	for _, want := range []string{"boom", "2 attempts", "set aside", "Do not call it again with the same input"} {
		if !strings.Contains(text, want) {
			t.Errorf("content %q does not say %q", text, want)
		}
	}

	s := newStore(t, b)
	var ls []*dlq.Letter
	eventually(t, "the dead letter", func() bool {
		ls, _ = s.List(ctxFor(t), dlq.Filter{})
		return len(ls) > 0
	})
	eventually(t, "both watchers to finish", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) >= 1 && streamMsgs(t, b.js, jetstream.StreamCalls) == 0
	})
	ls, _ = s.List(ctxFor(t), dlq.Filter{})
	if len(ls) != 1 {
		t.Fatalf("TOOL_DLQ holds %d letters, want 1 (two watchers, one dead letter)", len(ls))
	}
	e := ls[0].Entry
	if e == nil || e.Reason != classify.FatePoison || e.CallID != id || e.Tool != "boom" || e.Deliveries != 2 || e.SourceSeq == 0 {
		t.Fatalf("entry = %+v", e)
	}
	if len(e.Attempts) != 1 || e.Attempts[0].Code != "timeout" || e.AttemptCount() != 2 {
		t.Errorf("entry attempts = %+v (count %d); want the recorded one, count 2", e.Attempts, e.AttemptCount())
	}
	if h := ls[0].Header; h.Get(settle.HeaderReason) != "poison" || h.Get(settle.HeaderDeliveries) != "2" || h.Get(settle.HeaderCallID) != id {
		t.Errorf("headers = %v", h)
	}
	var call envelope.Call
	if err := json.Unmarshal(e.Call, &call); err != nil || call.ID != id || string(call.Input) != `{"x":1}` {
		t.Errorf("entry call = %s (%v)", e.Call, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, pc := range handled {
		if pc.Tool != "boom" || pc.CallID != id || pc.Deliveries != 2 {
			t.Errorf("OnPoison got %+v", pc)
		}
	}
}

// An advisory for a call already gone (acked late, or handled by another
// orchestrator) changes nothing; advisories are handled in order, so once
// the one after it was handled, it was too.
func TestPoisonWatcherIgnoresGoneCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	called := make(chan dlq.PoisonCall, 2)
	startWatcher(t, b, nil, func(pc dlq.PoisonCall) { called <- pc })
	id := newID()
	ack, err := b.js.Publish(ctxFor(t), jetstream.CallSubject("echo"), callData(t, id, "echo", `{"text":"x"}`, ""))
	if err != nil {
		t.Fatal(err)
	}
	subject := strings.Replace(dlq.PoisonAdvisorySubject, "*", jetstream.ConsumerName("echo"), 1)
	for _, seq := range []uint64{ack.Sequence + 100, ack.Sequence} {
		adv, _ := json.Marshal(map[string]any{
			"type": "io.nats.jetstream.advisory.v1.max_deliver", "stream": jetstream.StreamCalls,
			"consumer": jetstream.ConsumerName("echo"), "stream_seq": seq, "deliveries": 5,
		})
		if err := b.nc.Publish(subject, adv); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case pc := <-called:
		if pc.CallID != id || pc.StreamSeq != ack.Sequence || pc.Answered {
			t.Errorf("handled %+v; want call %s at %d, not answered (no reply_to)", pc, id, ack.Sequence)
		}
	case <-time.After(waitLong):
		t.Fatal("the advisory of a queued call was not handled")
	}
	select {
	case pc := <-called:
		t.Errorf("a gone call was handled: %+v", pc)
	default:
	}
	if n := streamMsgs(t, b.js, jetstream.StreamDLQ); n != 1 {
		t.Errorf("TOOL_DLQ holds %d, want 1", n)
	}
	if n := streamMsgs(t, b.js, jetstream.StreamCalls); n != 0 {
		t.Errorf("TOOL_CALLS holds %d, want 0", n)
	}
	if _, err := dlq.NewPoisonWatcher(dlq.PoisonConfig{}); err == nil {
		t.Error("NewPoisonWatcher without a connection succeeded")
	}
}
