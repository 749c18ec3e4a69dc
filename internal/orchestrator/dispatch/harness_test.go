package dispatch

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testBundle is a dispatcher on a real embedded JetStream server.
type testBundle struct {
	srv     *embedded.Server
	nc      *nats.Conn
	js      js.JetStream
	d       *Dispatcher
	metrics *testMetrics
}

// setup starts a provisioned server and a started dispatcher serving the
// tools echo, fail, maybe and slow. mod may change the config.
func setup(t testing.TB, mod ...func(*Config)) *testBundle {
	t.Helper()
	srv, nc, j := natstest.StartProvisioned(t)
	b := &testBundle{srv: srv, nc: nc, js: j, metrics: newTestMetrics()}
	// b's server as it is when the test ends (a test may restart it) is
	// shut down after the dispatchers and workers the test started: they
	// stop against a live server, not into their stop timeouts.
	t.Cleanup(func() { b.srv.Shutdown() })
	cfg := Config{
		JS:      j,
		Catalog: discovery.StaticCatalog("echo", "fail", "maybe", "slow"),
		Logger:  natstest.Logger(t),
		Metrics: b.metrics,
	}
	for _, m := range mod {
		m(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stopNow(d) })
	b.d = d
	return b
}

// reply publishes a result for the call being handled; msgID "" publishes
// without a Nats-Msg-Id (as a re-execution after the dedup window would).
type reply func(r *envelope.Result, msgID string)

// handler is the fake worker's tool: it may reply zero, one or more times,
// at once or later from a goroutine it starts with fakeWorker.Go.
type handler func(w *fakeWorker, c *envelope.Call, h nats.Header, reply reply)

// fakeWorker stands in for pkg/worker: a durable pull consumer tool_<tool>
// on TOOL_CALLS, on its own connection, publishing results to
// tools.result.<reply_to>.<key> with Nats-Msg-Id = <reply_to>.<key>, then
// acking.
type fakeWorker struct {
	t     testing.TB
	js    js.JetStream
	execs atomic.Int64
	wg    sync.WaitGroup
	done  chan struct{}

	mu    sync.Mutex
	calls []*envelope.Call
	hdrs  []nats.Header
}

func startWorker(t testing.TB, b *testBundle, tool string, h handler) *fakeWorker {
	t.Helper()
	nc := natstest.Connect(t, b.srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w := &fakeWorker{t: t, js: j, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := j.CreateOrUpdateConsumer(ctx, jetstream.StreamCalls, js.ConsumerConfig{
		Durable:       jetstream.ConsumerName(tool),
		FilterSubject: jetstream.CallSubject(tool),
		AckPolicy:     js.AckExplicitPolicy,
		AckWait:       30 * time.Second,
	})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	cc, err := cons.Consume(func(m js.Msg) {
		c, err := envelope.DecodeCall(m.Data(), envelope.DefaultLimits)
		if err != nil {
			t.Errorf("worker %s: bad call: %v", tool, err)
			_ = m.Term()
			return
		}
		w.execs.Add(1)
		w.mu.Lock()
		w.calls = append(w.calls, c)
		w.hdrs = append(w.hdrs, m.Headers())
		w.mu.Unlock()
		h(w, c, m.Headers(), func(r *envelope.Result, msgID string) { w.publish(c, r, msgID) })
		_ = m.Ack()
	})
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	t.Cleanup(func() {
		close(w.done)
		w.wg.Wait()
		cc.Stop()
		<-cc.Closed()
	})
	return w
}

// Go runs f on a goroutine the worker's cleanup waits for. f should return
// when done is closed.
func (w *fakeWorker) Go(f func(done <-chan struct{})) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f(w.done)
	}()
}

func (w *fakeWorker) publish(c *envelope.Call, r *envelope.Result, msgID string) {
	if r.CallID == "" {
		r.CallID = c.ID
	}
	if r.Tool == "" {
		r.Tool = c.Tool
	}
	if r.Key == "" {
		r.Key = c.Key
	}
	data, err := envelope.EncodeResult(r)
	if err != nil {
		panic("encode result: " + err.Error())
	}
	m := &nats.Msg{Subject: jetstream.ResultSubject(c.ReplyTo, c.Key), Data: data, Header: nats.Header{}}
	if msgID != "" {
		m.Header.Set(js.MsgIDHeader, msgID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = w.js.PublishMsg(ctx, m) // a failure shows as a missing result
}

// msgID is the Nats-Msg-Id of a result of c, as pkg/worker sets it.
func msgID(c *envelope.Call) string { return jetstream.ResultMsgID(c.ReplyTo, c.Key) }

func (w *fakeWorker) seen() ([]*envelope.Call, []nats.Header) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*envelope.Call(nil), w.calls...), append([]nats.Header(nil), w.hdrs...)
}

// echoText answers with the input's "text" member.
func echoText(_ *fakeWorker, c *envelope.Call, _ nats.Header, reply reply) {
	var in struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c.Input, &in)
	reply(&envelope.Result{Content: envelope.Text(in.Text)}, msgID(c))
}

// alwaysFail answers with a permanent is_error.
func alwaysFail(_ *fakeWorker, c *envelope.Call, _ nats.Header, reply reply) {
	reply(&envelope.Result{
		Content: envelope.Text("The tool fail failed on purpose."), IsError: true,
		Class: envelope.ClassPermanent, Code: "permanent", Attempts: 1,
	}, msgID(c))
}

// maybeFail fails unless the input is {"ok": true}.
func maybeFail(_ *fakeWorker, c *envelope.Call, _ nats.Header, reply reply) {
	var in struct {
		OK bool `json:"ok"`
	}
	_ = json.Unmarshal(c.Input, &in)
	if in.OK {
		reply(&envelope.Result{Content: envelope.Text("fine")}, msgID(c))
		return
	}
	reply(&envelope.Result{
		Content: envelope.Text("The tool maybe failed."), IsError: true,
		Class: envelope.ClassTransient, Code: "timeout", Attempts: 3,
	}, msgID(c))
}

func use(id, tool, input string) envelope.ToolUseBlock {
	return envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: tool, Input: json.RawMessage(input)}
}

// testMetrics records what the dispatcher reports.
type testMetrics struct {
	mu         sync.Mutex
	dispatched map[string]int
	received   map[string]int
	classes    map[envelope.Class]int
	late       map[string]int
	duplicate  map[string]int
	expired    map[string]int
	pending    atomic.Int64
}

func newTestMetrics() *testMetrics {
	return &testMetrics{
		dispatched: map[string]int{}, received: map[string]int{}, classes: map[envelope.Class]int{},
		late: map[string]int{}, duplicate: map[string]int{}, expired: map[string]int{},
	}
}

func (m *testMetrics) inc(mp map[string]int, tool string) {
	m.mu.Lock()
	mp[tool]++
	m.mu.Unlock()
}

func (m *testMetrics) CallDispatched(tool string) { m.inc(m.dispatched, tool) }
func (m *testMetrics) ResultReceived(tool string, class envelope.Class, elapsed time.Duration) {
	m.mu.Lock()
	m.received[tool]++
	m.classes[class]++
	m.mu.Unlock()
}
func (m *testMetrics) LateResult(tool string)      { m.inc(m.late, tool) }
func (m *testMetrics) DuplicateResult(tool string) { m.inc(m.duplicate, tool) }
func (m *testMetrics) Expired(tool string)         { m.inc(m.expired, tool) }
func (m *testMetrics) Pending(delta int)           { m.pending.Add(int64(delta)) }

func (m *testMetrics) get(which string, tool string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := map[string]map[string]int{
		"dispatched": m.dispatched, "received": m.received, "late": m.late,
		"duplicate": m.duplicate, "expired": m.expired,
	}[which]
	return mp[tool]
}

// eventually polls cond until it holds or 5s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, 5*time.Second, what, cond)
}

// streamMsgs is the number of messages in stream.
func streamMsgs(t testing.TB, j js.JetStream, stream string) uint64 {
	t.Helper()
	s, err := j.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// stopNow stops d without draining: the turns in progress fail at once.
func stopNow(d *Dispatcher) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = d.Stop(ctx)
}

// startLocal starts d without a server, for a fake JetStream that answers
// the calls itself: Start's result stream, progress subscription, presence
// and result consumer are left out (Config.ResultCheckInterval must be
// negative: there is no consumer to watch). It is stopped, without a
// drain, when the test ends.
func startLocal(tb testing.TB, d *Dispatcher) {
	tb.Helper()
	err := d.Base.Start(context.Background(), func(life context.Context) error {
		d.launch(life)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stopNow(d) })
}
