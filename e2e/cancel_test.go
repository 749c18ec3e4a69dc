package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// watchedSleep is the demo sleep tool, watched: each run of it is counted
// and announced on started, with the input it got, and the cause of its
// context's end is kept.
type watchedSleep struct {
	runs    atomic.Int64
	started chan string // the input of each run, as it starts
	mu      sync.Mutex
	causes  []error // context.Cause of each run that ended with its context done
	ended   chan error
}

func newWatchedSleep() *watchedSleep {
	return &watchedSleep{started: make(chan string, 16), ended: make(chan error, 16)}
}

func (s *watchedSleep) tool() tools.Tool {
	t := demo.Sleep()
	inner := t.Handler
	t.Retry = fastRetry
	t.Handler = func(ctx context.Context, in json.RawMessage) (tools.Output, error) {
		s.runs.Add(1)
		s.started <- string(in)
		out, err := inner(ctx, in)
		if ctx.Err() != nil {
			cause := context.Cause(ctx)
			s.mu.Lock()
			s.causes = append(s.causes, cause)
			s.mu.Unlock()
			s.ended <- cause
		}
		return out, err
	}
	return t
}

// cancelPool is a pool whose orchestrator's metrics the test reads.
type cancelPool struct{ *pool }

func newCancelPool(t *testing.T, ts ...tools.Tool) *cancelPool {
	t.Helper()
	return &cancelPool{newPool(t, ts...)}
}

// counter is the value of the orchestrator's counter name for tool (0
// when it has no such series).
func (p *cancelPool) counter(name, tool string) float64 {
	p.t.Helper()
	families, err := p.o.Metrics().Gather()
	if err != nil {
		p.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tool" && l.GetValue() == tool {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// callsSettled waits until TOOL_CALLS holds no message and the tool's
// consumer has none in flight: nothing can be delivered again.
func (p *cancelPool) callsSettled(tool string) {
	p.t.Helper()
	eventually(p.t, "TOOL_CALLS empty and nothing pending for "+tool, func() bool {
		if streamState(p.t, p.js, jetstream.StreamCalls).Msgs != 0 {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := p.js.Consumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName(tool))
		if errors.Is(err, js.ErrConsumerNotFound) {
			return true
		}
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
}

// history is the attempt history of the call b (session "", no tenant).
func (p *cancelPool) history(b envelope.ToolUseBlock) []settle.Attempt {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := settle.OpenHistory(ctx, p.js, settle.HistoryConfig{})
	if err != nil {
		p.t.Fatal(err)
	}
	as, err := h.Load(ctx, envelope.CallKey("", "", b.ID, b.Name, b.Input))
	if err != nil {
		p.t.Fatal(err)
	}
	return as
}

func awaitCancelled(t *testing.T, ch <-chan turnResult) {
	t.Helper()
	select {
	case tr := <-ch:
		if !errors.Is(tr.err, context.Canceled) {
			t.Fatalf("Dispatch = %v, %v; want an error wrapping context.Canceled", tr.results, tr.err)
		}
	case <-time.After(waitLong):
		t.Fatal("Dispatch did not return after its ctx was cancelled")
	}
}

// Cancelling the ctx of a Dispatch whose sleep call runs cancels the
// call's context on the worker, with worker.ErrCancelled as its cause; the
// call is acked, not retried, not dead-lettered, counted by tool, and its
// history shows the attempt as cancelled.
func TestCancelRunningCall(t *testing.T) {
	t.Parallel()
	s := newWatchedSleep()
	p := newCancelPool(t, s.tool())
	rec := newRecordingMetrics()
	pooltest.StartServer(t, p.srv.ClientURL(), p.reg, func(c *pooltest.ServerConfig) {
		c.NoHistory = false // the attempt history, for the cancelled attempt
		c.Worker.Metrics = rec
	})

	b := toolUse("sleep", `{"ms":3000}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	turn := p.dispatchAsync(ctx, b)
	<-s.started
	cancelled := time.Now()
	cancel()
	awaitCancelled(t, turn)

	select {
	case cause := <-s.ended:
		t.Logf("the handler's context ended %v after the cancellation", time.Since(cancelled).Round(time.Millisecond))
		if !errors.Is(cause, worker.ErrCancelled) {
			t.Errorf("the handler's context ended with cause %v; want worker.ErrCancelled", cause)
		}
	case <-time.After(waitLong):
		t.Fatal("the running call's context was not cancelled")
	}
	p.callsSettled("sleep")
	eventually(t, "the worker observes the cancelled call", func() bool {
		for _, ev := range rec.all() {
			if ev.Outcome == classify.FateCancelled {
				return true
			}
		}
		return false
	})
	for _, ev := range rec.all() {
		if ev.Outcome != classify.FateCancelled || !ev.Executed || ev.Attempt != 1 {
			t.Errorf("worker event %+v; want one executed attempt, cancelled", ev)
		}
	}
	if n := s.runs.Load(); n != 1 {
		t.Errorf("the call ran %d times, want 1", n)
	}
	if n := streamState(t, p.js, jetstream.StreamDLQ).Msgs; n != 0 {
		t.Errorf("TOOL_DLQ holds %d dead letters, want none", n)
	}
	if n := len(streamMsgs(t, p.js, jetstream.StreamResults, "")); n != 0 {
		t.Errorf("TOOL_RESULTS holds %d results, want none (nobody waits)", n)
	}
	if n := p.counter("toolpool_dispatch_cancelled_total", "sleep"); n != 1 {
		t.Errorf("toolpool_dispatch_cancelled_total{tool=sleep} = %v, want 1", n)
	}
	eventually(t, "the cancelled attempt in the history", func() bool { return len(p.history(b)) == 1 })
	if a := p.history(b)[0]; !a.Cancelled || a.N != 1 || a.Code != string(classify.FateCancelled) {
		t.Errorf("history %+v; want attempt 1 cancelled", a)
	}

	// The same call dispatched again runs again: JetStream does not drop
	// it as a duplicate of the cancelled message.
	if res := p.callBlock(b); res.IsError || res.Content.Text() != "slept 3000 ms" {
		t.Errorf("the same call again after the cancellation: %+v", res)
	}
	if n := s.runs.Load(); n != 2 {
		t.Errorf("the call ran %d times in all, want 2", n)
	}
}

// A call cancelled while no worker runs is deleted from TOOL_CALLS: the
// worker that starts later never runs it.
func TestCancelQueuedCallNeverRuns(t *testing.T) {
	t.Parallel()
	s := newWatchedSleep()
	p := newCancelPool(t, s.tool())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	turn := p.dispatchAsync(ctx, toolUse("sleep", `{"ms":600000}`))
	eventually(t, "the call stored in TOOL_CALLS", func() bool {
		return streamState(t, p.js, jetstream.StreamCalls).Msgs == 1
	})
	cancel()
	awaitCancelled(t, turn)
	eventually(t, "the cancelled call deleted from TOOL_CALLS", func() bool {
		return streamState(t, p.js, jetstream.StreamCalls).Msgs == 0
	})

	rec := newRecordingMetrics()
	p.startWorker(func(c *worker.Config) { c.Metrics = rec })
	// A call published after it is delivered after it: once it is
	// answered, the cancelled one would have been delivered already.
	if res := p.call("sleep", `{"ms":1}`); res.IsError {
		t.Fatalf("probe call: %+v", res)
	}
	if in := <-s.started; in != `{"ms":1}` {
		t.Errorf("the worker ran %s; want only the probe", in)
	}
	if n := s.runs.Load(); n != 1 {
		t.Errorf("sleep ran %d times, want 1 (the probe)", n)
	}
	if n := p.counter("toolpool_dispatch_cancelled_total", "sleep"); n != 1 {
		t.Errorf("toolpool_dispatch_cancelled_total{tool=sleep} = %v, want 1", n)
	}
}

// A cancellation that reaches a worker before the call message does (the
// message waits in TOOL_CALLS, the worker's only slot being busy) makes the
// worker settle the message without running it once it takes it.
func TestCancelBeforeDeliverySettlesWithoutRunning(t *testing.T) {
	t.Parallel()
	s := newWatchedSleep()
	p := newCancelPool(t, s.tool())
	rec := newRecordingMetrics()
	p.startWorker(func(c *worker.Config) { c.Metrics = rec; c.Concurrency = 1 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	busy := p.dispatchAsync(ctx, toolUse("sleep", `{"ms":600000}`)) // holds the only slot
	<-s.started

	// A call published by hand, as another orchestrator would: no
	// dispatcher deletes it, only the cancellation names it.
	call := &envelope.Call{ID: newCallID(), Tool: "sleep", Input: json.RawMessage(`{"ms":600000}`), CreatedAt: time.Now(), Deadline: time.Now().Add(waitLong)}
	call.Key = envelope.CallKey("", "", call.ID, call.Tool, call.Input)
	data, err := envelope.EncodeCall(call)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := p.js.Publish(context.Background(), jetstream.CallSubject("sleep"), data, js.WithMsgID(call.Key))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.nc.Publish(jetstream.CancelSubject("sleep", call.Key), []byte(strconv.FormatUint(ack.Sequence, 10))); err != nil {
		t.Fatal(err)
	}
	// The dispatcher publishes its cancellation of the busy call on the
	// same connection, after this one: the worker hears of both in order,
	// and frees the slot only after the second.
	cancel() // frees the slot: the worker takes the hand-made call next
	awaitCancelled(t, busy)
	p.callsSettled("sleep")
	eventually(t, "both calls settled as cancelled", func() bool {
		n := 0
		for _, ev := range rec.all() {
			if ev.Outcome == classify.FateCancelled {
				n++
			}
		}
		return n == 2
	})
	if n := s.runs.Load(); n != 1 {
		t.Errorf("sleep ran %d times, want 1 (the busy call only)", n)
	}
	executed := 0
	for _, ev := range rec.all() {
		if ev.Executed {
			executed++
		}
	}
	if executed != 1 {
		t.Errorf("worker events %+v; want one executed, one settled without running", rec.all())
	}
}

// A Dispatch cancelled after its result came cancels nothing: the result
// is cached and served again, and nothing is counted.
func TestCancelAfterResultIsNoOp(t *testing.T) {
	t.Parallel()
	s := newWatchedSleep()
	p := newCancelPool(t, s.tool())
	rec := newRecordingMetrics()
	p.startWorker(func(c *worker.Config) { c.Metrics = rec })

	b := toolUse("sleep", `{"ms":1}`)
	ctx, cancel := context.WithCancel(context.Background())
	res, err := p.d.Dispatch(ctx, "", []envelope.ToolUseBlock{b})
	cancel()
	if err != nil || res[0].IsError {
		t.Fatalf("Dispatch = %+v, %v", res, err)
	}
	// A cancellation of the finished message, sent by hand, is a no-op too.
	if err := p.nc.Publish(jetstream.CancelSubject("sleep", "k"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if again := p.callBlock(b); again.IsError || again.Content.Text() != res[0].Content.Text() {
		t.Errorf("the same call again: %+v; want the first result", again)
	}
	if r := p.call("sleep", `{"ms":1}`); r.IsError {
		t.Errorf("a later call: %+v", r)
	}
	if n := s.runs.Load(); n != 2 {
		t.Errorf("sleep ran %d times, want 2", n)
	}
	if n := p.counter("toolpool_dispatch_cancelled_total", "sleep"); n != 0 {
		t.Errorf("toolpool_dispatch_cancelled_total{tool=sleep} = %v, want 0", n)
	}
	for _, ev := range rec.all() {
		if ev.Outcome != classify.FateSuccess {
			t.Errorf("worker event %+v; want successes only", ev)
		}
	}
}

// An HTTP client that disconnects from POST /v1/tool_calls while its call
// runs cancels the call on the worker.
func TestCancelHTTPClientDisconnect(t *testing.T) {
	t.Parallel()
	s := newWatchedSleep()
	p := newCancelPool(t, s.tool())
	p.startWorker()
	srv := httptest.NewServer(p.o.Handler())
	t.Cleanup(srv.Close)

	body := `{"role":"assistant","content":[{"type":"tool_use","id":"` + newCallID() + `","name":"sleep","input":{"ms":600000}}]}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/tool_calls", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-s.started
	cancel() // the client aborts: its connection closes
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the client's request ended with %v; want it cancelled", err)
	}
	select {
	case cause := <-s.ended:
		if !errors.Is(cause, worker.ErrCancelled) {
			t.Errorf("the handler's context ended with cause %v; want worker.ErrCancelled", cause)
		}
	case <-time.After(waitLong):
		t.Fatal("the client's disconnect did not cancel the running call")
	}
	p.callsSettled("sleep")
	if n := streamState(t, p.js, jetstream.StreamDLQ).Msgs; n != 0 {
		t.Errorf("TOOL_DLQ holds %d dead letters, want none", n)
	}
	if n := p.counter("toolpool_dispatch_cancelled_total", "sleep"); n != 1 {
		t.Errorf("toolpool_dispatch_cancelled_total{tool=sleep} = %v, want 1", n)
	}
}
