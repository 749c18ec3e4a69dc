package dispatch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// A result consumer that stops delivering without noticing (seen after a
// cluster node died) is replaced by the watchdog: the waiting turn gets its
// result from TOOL_RESULTS, not a timeout.
func TestResultWatchdogReplacesStalledConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ResultCheckInterval = 200 * time.Millisecond })
	startWorker(t, b, "echo", echoText)
	if _, err := b.d.Dispatch(timeout(t, 10*time.Second), "", []envelope.ToolUseBlock{use("before", "echo", `{}`)}); err != nil {
		t.Fatal(err)
	}

	// Stall it behind the dispatcher's back: it stops pulling, and the
	// server still has it.
	stalled := b.d.current()
	stalled.cc.Stop()
	<-stalled.cc.Closed()

	res, err := b.d.Dispatch(timeout(t, 20*time.Second), "", []envelope.ToolUseBlock{use("after", "echo", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].IsError || res[0].CallID != "after" {
		t.Fatalf("result after the stall = %+v, want the tool's", res)
	}
	if got := b.metrics.get("duplicate", "echo"); got != 0 {
		t.Errorf("duplicate results = %d, want 0", got)
	}
	// The new consumer may deliver before the watchdog counts it.
	eventually(t, "the watchdog to count the new consumer", func() bool { return b.d.feed.restarts.Load() >= 1 })
	// The new consumer started after the last result handled: each result
	// was delivered once.
	if got := b.metrics.get("received", "echo"); got != 2 {
		t.Errorf("results received = %d, want 2", got)
	}
}

// While a slow tool runs and no result is waiting, the watchdog leaves the
// consumer alone.
func TestResultWatchdogLeavesIdleConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ResultCheckInterval = 100 * time.Millisecond })
	startWorker(t, b, "slow", func(w *fakeWorker, c *envelope.Call, _ nats.Header, reply reply) {
		w.Go(func(done <-chan struct{}) {
			select {
			case <-time.After(time.Second):
			case <-done:
				return
			}
			echoText(w, c, nil, reply)
		})
	})
	res, err := b.d.Dispatch(timeout(t, 20*time.Second), "", []envelope.ToolUseBlock{use("slow1", "slow", `{}`)})
	if err != nil || len(res) != 1 || res[0].IsError {
		t.Fatalf("Dispatch = %+v, %v", res, err)
	}
	if n := b.d.feed.restarts.Load(); n != 0 {
		t.Errorf("the watchdog made %d new consumers while nothing was stuck, want 0", n)
	}
}

// resultConsumers lists the consumers of TOOL_RESULTS.
func resultConsumers(t *testing.T, b *testBundle) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := b.js.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range s.ConsumerNames(ctx).Name() {
		names = append(names, name)
	}
	return names
}

// A result consumer deleted under the dispatcher (by an operator, or by
// the server after the connection was down too long) is made again at
// once, and the dispatcher deletes its consumer when it stops.
func TestResultConsumerMadeAgainAfterDeletion(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ResultCheckInterval = 200 * time.Millisecond })
	startWorker(t, b, "echo", echoText)
	gone := b.d.current().name
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.js.DeleteConsumer(ctx, jetstream.StreamResults, gone); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, "a new result consumer", func() bool {
		s := b.d.current()
		return s != nil && s.name != gone
	})
	res, err := b.d.Dispatch(timeout(t, 20*time.Second), "", []envelope.ToolUseBlock{use("after", "echo", `{}`)})
	if err != nil || len(res) != 1 || res[0].IsError {
		t.Fatalf("Dispatch after the deletion = %+v, %v", res, err)
	}
	if names := resultConsumers(t, b); len(names) != 1 || names[0] != b.d.current().name {
		t.Errorf("consumers of %s = %v, want only the new one", jetstream.StreamResults, names)
	}
	stopNow(b.d)
	if names := resultConsumers(t, b); len(names) != 0 {
		t.Errorf("consumers of %s after Stop = %v, want none", jetstream.StreamResults, names)
	}
}

// gapMsg is a result message with the sequences its ack subject (its
// metadata) reports.
type gapMsg struct {
	js.Msg
	md   js.MsgMetadata
	data []byte
}

func (m gapMsg) Reply() string {
	return fmt.Sprintf("$JS.ACK.TOOL_RESULTS.fake.1.%d.%d.1700000000000000000.0", m.md.Sequence.Stream, m.md.Sequence.Consumer)
}
func (m gapMsg) Data() []byte    { return m.data }
func (m gapMsg) Subject() string { return "tools.result.test" }

// A jump in consumer sequence numbers (results lost on the way) asks for a
// new consumer, which must start before the lost results: the results
// after the gap no longer move the sequence it starts from.
func TestResultGapKeepsStartBeforeLostResults(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ResultCheckInterval = -1 }) // no watchdog: the kick stays queued
	s := &resultSub{ResultConsumer: &ResultConsumer{name: "fake"}}
	real := b.d.feed.sub.Swap(s)
	defer b.d.feed.sub.Store(real)
	start := b.d.feed.lastSeq.Load()
	h := b.d.resultHandler(s)
	data, err := envelope.EncodeResult(&envelope.Result{V: envelope.Version, CallID: "toolu_gap", Content: envelope.Text("x")})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(cons, stream uint64) {
		h(gapMsg{md: js.MsgMetadata{Sequence: js.SequencePair{Consumer: cons, Stream: start + stream}}, data: data})
	}

	deliver(1, 5)
	if got := b.d.feed.lastSeq.Load(); got != start+5 {
		t.Fatalf("last sequence %d after the first result, want %d", got, start+5)
	}
	deliver(3, 9) // consumer sequence 2 never arrived
	select {
	case why := <-b.d.feed.kicked:
		if !strings.Contains(why, "1 results were lost") {
			t.Errorf("kick reason %q", why)
		}
	default:
		t.Fatal("a gap did not ask for a new consumer")
	}
	deliver(4, 10)
	if got := b.d.feed.lastSeq.Load(); got != start+5 {
		t.Errorf("last sequence %d after the gap, want %d (the result before it)", got, start+5)
	}
}

// firedDeadline is a ctx whose deadline passes when fire is called, not
// at the time Deadline reports: a test makes a turn expire once what it
// waits for has happened, instead of waiting out a fixed deadline.
type firedDeadline struct {
	context.Context // values
	deadline        time.Time
	done            chan struct{}
	once            sync.Once
}

func newFiredDeadline(d time.Duration) *firedDeadline {
	return &firedDeadline{Context: context.Background(), deadline: time.Now().Add(d), done: make(chan struct{})}
}

func (c *firedDeadline) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *firedDeadline) Done() <-chan struct{}       { return c.done }
func (c *firedDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
func (c *firedDeadline) fire() { c.once.Do(func() { close(c.done) }) }

// A result is delivered by its subject's call key: one published on another
// call's subject with this call's key in its body (a publisher answering one
// call with another's result) reaches neither.
func TestResultOnAnotherCallsSubjectIsDropped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := envelope.CallKey("", "", "someone_else", "echo", []byte(`{}`))
	forged := make(chan uint64, 1) // its stream sequence
	startWorker(t, b, "echo", func(w *fakeWorker, c *envelope.Call, _ nats.Header, _ reply) {
		data, err := envelope.EncodeResult(&envelope.Result{CallID: c.ID, Tool: c.Tool, Key: c.Key, Content: envelope.Text("forged")})
		if err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ack, err := w.js.Publish(ctx, jetstream.ResultSubject(c.ReplyTo, other), data)
		if err != nil {
			t.Error(err)
			return
		}
		forged <- ack.Sequence
	})
	// The turn's deadline passes once the dispatcher has handled the forged
	// result: a result it delivered is in the turn's channel by then, and
	// the expiring turn takes it. Handled means the result after it (one
	// for no call) was taken: the results are handled in order.
	ctx := newFiredDeadline(30 * time.Second)
	go func() {
		defer ctx.fire()
		var seq uint64
		select {
		case seq = <-forged:
		case <-time.After(30 * time.Second):
			return
		}
		data, err := envelope.EncodeResult(&envelope.Result{CallID: "nobody", Tool: "echo", Key: other, Content: envelope.Text("for no call")})
		if err != nil {
			t.Error(err)
			return
		}
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ack, err := b.js.Publish(pctx, jetstream.ResultSubject(b.d.Instance(), other), data)
		if err != nil {
			t.Error(err)
			return
		}
		for deadline := time.Now().Add(30 * time.Second); b.d.feed.lastSeq.Load() < max(seq, ack.Sequence) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, err := b.d.Dispatch(ctx, "", []envelope.ToolUseBlock{use("victim", "echo", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !res[0].IsError || res[0].Code != "deadline_exceeded" {
		t.Fatalf("result = %+v; want the deadline's is_error, not the result published on another call's subject", res)
	}
}

// A replica killed and restarted under its fixed instance name within the
// result consumer's inactivity threshold finds its old consumer (made for
// another start sequence) still on the server: it replaces it and starts.
func TestRestartUnderTheSameInstanceReplacesTheOldConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Instance = "r1" })
	startWorker(t, b, "echo", echoText)
	if _, err := b.d.Dispatch(timeout(t, 20*time.Second), "", []envelope.ToolUseBlock{use("before", "echo", `{}`)}); err != nil {
		t.Fatal(err)
	}
	old := b.d.current().name
	b.d.current().Stop() // the process dies: its consumer stays, as kill -9 leaves it
	d2, err := New(Config{JS: b.js, Instance: "r1", Catalog: discovery.StaticCatalog("echo"), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Start(timeout(t, 20*time.Second)); err != nil {
		t.Fatalf("a restart under the same instance: %v", err)
	}
	defer stopNow(d2)
	if d2.current().name != old {
		t.Fatalf("the new consumer is %s, want %s replaced", d2.current().name, old)
	}
	res, err := d2.Dispatch(timeout(t, 20*time.Second), "", []envelope.ToolUseBlock{use("after", "echo", `{}`)})
	if err != nil || len(res) != 1 || res[0].IsError {
		t.Fatalf("Dispatch after the restart = %+v, %v", res, err)
	}
}
