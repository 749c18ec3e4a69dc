package worker_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared and the tests run with -race.
const waitLong = 30 * time.Second

// replyTo is the orchestrator instance the test's calls name.
const replyTo = "worker-test"

// testBundle is a provisioned JetStream server, a registry, and a watcher
// of the results published for replyTo.
type testBundle struct {
	srv     *embedded.Server
	js      js.JetStream // the publisher's connection
	reg     *tools.Registry
	results *resultWatcher
}

// setup starts a server and registers ts.
func setup(t *testing.T, ts ...tools.Tool) *testBundle {
	t.Helper()
	srv, _, j := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	for _, tool := range ts {
		if err := reg.Register(tool); err != nil {
			t.Fatalf("register %s: %v", tool.Name, err)
		}
	}
	return &testBundle{srv: srv, js: j, reg: reg, results: watchResults(t, j)}
}

// start starts a worker for the bundle's registry on a connection of its
// own; mods may change its config. It is stopped when the test ends.
func (b *testBundle) start(t *testing.T, mods ...func(*worker.Config)) *worker.Worker {
	t.Helper()
	w, _ := b.startConn(t, mods...)
	return w
}

// startConn is start, also returning the worker's connection.
func (b *testBundle) startConn(t *testing.T, mods ...func(*worker.Config)) (*worker.Worker, *nats.Conn) {
	t.Helper()
	nc := natstest.Connect(t, b.srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := worker.Config{JetStream: j, Registry: b.reg, Logger: natstest.Logger(t)}
	for _, m := range mods {
		m(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w, nc
}

var callSeq atomic.Int64

// publish publishes a call to tool with input, replying to replyTo, and
// returns its id. mods may change the call before it is encoded.
func (b *testBundle) publish(t *testing.T, tool, input string, mods ...func(*envelope.Call)) string {
	t.Helper()
	c := &envelope.Call{
		V: envelope.Version, ID: fmt.Sprintf("toolu_worker_%06d", callSeq.Add(1)), Tool: tool,
		Input: json.RawMessage(input), ReplyTo: replyTo,
		CreatedAt: time.Now(), Deadline: time.Now().Add(time.Minute),
	}
	for _, m := range mods {
		m(c)
	}
	data, err := envelope.EncodeCall(c)
	if err != nil {
		t.Fatalf("encode call: %v", err)
	}
	b.publishRaw(t, tool, data, c.ID)
	return c.ID
}

// publishRaw publishes data on tool's call subject, with msgID as
// Nats-Msg-Id unless it is empty.
func (b *testBundle) publishRaw(t *testing.T, tool string, data []byte, msgID string) {
	t.Helper()
	m := nats.NewMsg(jetstream.CallSubject(tool))
	m.Data = data
	if msgID != "" {
		m.Header.Set(nats.MsgIdHdr, msgID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// resultWatcher collects the results published on tools.result.<replyTo>.
type resultWatcher struct {
	mu      sync.Mutex
	byID    map[string][]*envelope.Result
	changed chan struct{} // closed and replaced on every result
}

func watchResults(t *testing.T, j js.JetStream) *resultWatcher {
	t.Helper()
	w := &resultWatcher{byID: map[string][]*envelope.Result{}, changed: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := j.OrderedConsumer(ctx, jetstream.StreamResults, js.OrderedConsumerConfig{
		FilterSubjects: []string{jetstream.ResultFilter(replyTo)},
	})
	if err != nil {
		t.Fatalf("result consumer: %v", err)
	}
	cc, err := cons.Consume(func(m js.Msg) {
		r, err := envelope.DecodeResult(m.Data())
		if err != nil {
			t.Errorf("a result does not decode: %v", err)
			return
		}
		w.mu.Lock()
		w.byID[r.CallID] = append(w.byID[r.CallID], r)
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	})
	if err != nil {
		t.Fatalf("consume results: %v", err)
	}
	t.Cleanup(func() {
		cc.Stop()
		<-cc.Closed()
	})
	return w
}

// await waits for the result of call id.
func (w *resultWatcher) await(t *testing.T, id string) *envelope.Result {
	t.Helper()
	timeout := time.After(waitLong)
	for {
		w.mu.Lock()
		rs, changed := w.byID[id], w.changed
		w.mu.Unlock()
		if len(rs) > 0 {
			return rs[0]
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no result for call %s within %v", id, waitLong)
		}
	}
}

// count is the number of results received for call id.
func (w *resultWatcher) count(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byID[id])
}

// recorder is a worker.Metrics that keeps every event and the in-flight
// gauge per tool.
type recorder struct {
	mu       sync.Mutex
	events   []worker.Event
	inFlight map[string]int
	started  map[string]int // InFlight(+1) calls per tool
	queued   map[string]int
}

func newRecorder() *recorder {
	return &recorder{inFlight: map[string]int{}, started: map[string]int{}, queued: map[string]int{}}
}

func (r *recorder) Queued(tool string, delta int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queued[tool] += delta
}

// queuedNow is the number of calls of tool waiting for a slot.
func (r *recorder) queuedNow(tool string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queued[tool]
}

func (r *recorder) Observe(ev worker.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) InFlight(tool string, delta int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight[tool] += delta
	if delta > 0 {
		r.started[tool] += delta
	}
}

func (r *recorder) all() []worker.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitEvents waits until r holds at least n events; a timeout logs those
// it holds.
func (r *recorder) waitEvents(t *testing.T, n int) []worker.Event {
	t.Helper()
	var evs []worker.Event
	defer func() {
		if len(evs) < n {
			t.Logf("%d events, want %d: %+v", len(evs), n, evs)
		}
	}()
	natstest.Eventually(t, waitLong, fmt.Sprintf("%d events", n), func() bool {
		evs = r.all()
		return len(evs) >= n
	})
	return evs
}

// fixedRand is a classify.Rand that always returns its value.
type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

var anySchema = json.RawMessage(`{"type":"object"}`)

// tool is a tool with a short timeout and a fast retry policy.
func tool(name string, h tools.Handler) tools.Tool {
	return tools.Tool{
		Name:        name,
		Description: "a test tool",
		InputSchema: anySchema,
		Timeout:     2 * time.Second,
		Retry:       classify.Policy{MaxAttempts: 3, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second},
		Handler:     h,
	}
}

func textTool(name, text string) tools.Tool {
	return tool(name, func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text(text), nil })
}

func attemptOf(ctx context.Context) int {
	ci, _ := tools.CallInfoFrom(ctx)
	return ci.Attempt
}

func TestConfigValidationNamesField(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	reg.MustRegister(textTool("echo", "hi"))
	valid := func() worker.Config { return worker.Config{JetStream: j, Registry: reg} }

	tests := []struct {
		name  string
		mod   func(*worker.Config)
		field string // "" for a valid config
	}{
		{name: "valid with defaults", mod: func(*worker.Config) {}},
		{name: "no JetStream", mod: func(c *worker.Config) { c.JetStream = nil }, field: "Config.JetStream"},
		{name: "no registry", mod: func(c *worker.Config) { c.Registry = nil }, field: "Config.Registry"},
		{name: "negative concurrency", mod: func(c *worker.Config) { c.Concurrency = -1 }, field: "Config.Concurrency"},
		{name: "negative drain timeout", mod: func(c *worker.Config) { c.DrainTimeout = -time.Second }, field: "Config.DrainTimeout"},
		{name: "negative publish timeout", mod: func(c *worker.Config) { c.PublishTimeout = -time.Second }, field: "Config.PublishTimeout"},
		{name: "negative abandon grace", mod: func(c *worker.Config) { c.AbandonGrace = -time.Second }, field: "Config.AbandonGrace"},
		{name: "unknown tool", mod: func(c *worker.Config) { c.Tools = []string{"echo", "nope"} }, field: "Config.Tools"},
		{name: "empty registry: tools come later with Serve", mod: func(c *worker.Config) { c.Registry = tools.NewRegistry() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.mod(&cfg)
			w, err := worker.New(cfg)
			if tt.field == "" {
				if err != nil || w == nil {
					t.Fatalf("New = %v, %v; want a worker", w, err)
				}
				if w.ID() == "" {
					t.Error("a worker without a configured id has an empty ID")
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted the config; want an error naming %s", tt.field)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
		})
	}
}

func TestStopIdleReturnsNil(t *testing.T) {
	t.Parallel()
	b := setup(t, textTool("echo", "hi"))
	w := b.start(t, func(c *worker.Config) { c.WorkerID = "idle" })
	if w.ID() != "idle" {
		t.Errorf("ID = %q, want idle", w.ID())
	}
	// It serves before it stops.
	if r := b.results.await(t, b.publish(t, "echo", `{}`)); r.IsError || r.WorkerID != "idle" {
		t.Fatalf("result %+v", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Errorf("Stop with nothing in flight = %v, want nil", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Errorf("a second Stop = %v, want nil", err)
	}
	if err := w.Start(ctx); err == nil {
		t.Error("Start after Stop succeeded; a worker cannot be started again")
	}
}

// A handler that ignores its context's cancellation is abandoned after
// AbandonGrace: the call is answered as a timeout and the worker, with one
// slot of concurrency, goes on serving while the handler is still stuck.
func TestAbandonsHandlerIgnoringCancellation(t *testing.T) {
	t.Parallel()
	const (
		timeout = 200 * time.Millisecond
		grace   = 300 * time.Millisecond
	)
	release := make(chan struct{})
	var returned atomic.Bool
	stubborn := tool("stubborn", func(context.Context, json.RawMessage) (tools.Output, error) {
		<-release // ignores ctx
		returned.Store(true)
		return tools.Text("too late"), nil
	})
	stubborn.Timeout = timeout
	stubborn.Retry.MaxAttempts = 1
	b := setup(t, stubborn, textTool("echo", "still serving"))
	metrics := newRecorder()
	b.start(t, func(c *worker.Config) {
		c.Concurrency = 1
		c.AbandonGrace = grace
		c.Metrics = metrics
	})
	t.Cleanup(func() { close(release) }) // runs before the worker stops

	id := b.publish(t, "stubborn", `{}`)
	r := b.results.await(t, id)

	if !r.IsError || r.Class != envelope.ClassTransient || r.Code != classify.CodeTimeout {
		t.Fatalf("result %+v; want a transient timeout is_error", r)
	}
	if !strings.Contains(r.Content.Text(), "200ms") {
		t.Errorf("content does not give the timeout: %q", r.Content.Text())
	}
	if r.ExecTime < timeout+grace {
		t.Errorf("answered after %v of execution, before timeout+grace = %v", r.ExecTime, timeout+grace)
	}
	if returned.Load() {
		t.Fatal("the handler returned; the test needs it stuck")
	}
	if r := b.results.await(t, b.publish(t, "echo", `{}`)); r.IsError || r.Content.Text() != "still serving" {
		t.Errorf("echo while the abandoned handler is stuck: %+v", r)
	}
	evs := metrics.waitEvents(t, 2)
	var ev worker.Event
	for _, e := range evs {
		if e.Tool == "stubborn" {
			ev = e
		}
	}
	if ev.Outcome != classify.FateDeadLetter || ev.Code != classify.CodeTimeout || !ev.Executed || ev.Attempt != 1 {
		t.Errorf("event %+v; want a dead-lettered timeout of attempt 1 that executed", ev)
	}
}

func TestResultTruncatedToLimit(t *testing.T) {
	t.Parallel()
	const limit = 1000
	long := strings.Repeat("abcdefghij", 500)
	b := setup(t, textTool("long", long), textTool("short", "brief"))
	b.start(t, func(c *worker.Config) { c.Limits = envelope.Limits{MaxContentBytes: limit} })

	r := b.results.await(t, b.publish(t, "long", `{}`))
	if r.IsError {
		t.Fatalf("result %+v", r)
	}
	if size := r.Content.Size(); size > limit {
		t.Errorf("content is %d bytes, over the limit of %d", size, limit)
	}
	text := r.Content.Text()
	if !strings.HasPrefix(text, "abcdefghij") {
		t.Errorf("content does not start with the tool's output: %.40q", text)
	}
	for _, want := range []string{"[Output truncated:", "5,000 bytes", "left out"} {
		if !strings.Contains(text, want) {
			t.Errorf("content lacks the note %q: …%q", want, text[max(0, len(text)-200):])
		}
	}

	if r := b.results.await(t, b.publish(t, "short", `{}`)); r.Content.Text() != "brief" {
		t.Errorf("short content changed: %q", r.Content.Text())
	}
}

// Stop past its drain deadline cancels the running call with ErrShutdown
// and hands it back; another worker completes it.
func TestStopHandsBackRunningCall(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	long := tool("long", func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
		if attemptOf(ctx) == 1 {
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return tools.Output{}, ctx.Err()
		}
		return tools.Text("resumed"), nil
	})
	long.Timeout = 20 * time.Second
	b := setup(t, long)
	metrics := newRecorder()
	first := b.start(t, func(c *worker.Config) { c.WorkerID = "first"; c.Metrics = metrics })

	id := b.publish(t, "long", `{}`)
	select {
	case <-started:
	case <-time.After(waitLong):
		t.Fatal("the call never started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := first.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop with a call running past the drain = %v, want context.DeadlineExceeded", err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, worker.ErrShutdown) {
			t.Errorf("the call's context ended with cause %v, want worker.ErrShutdown", cause)
		}
	case <-time.After(waitLong):
		t.Fatal("the running call was not cancelled")
	}
	select {
	case <-first.Stopped():
	case <-time.After(waitLong):
		t.Fatal("Stopped not closed once the cancelled call returned")
	}
	if err := first.Start(context.Background()); err == nil {
		t.Error("a stopped worker started again")
	}

	second := b.start(t, func(c *worker.Config) { c.WorkerID = "second" })
	r := b.results.await(t, id)
	if r.IsError || r.Content.Text() != "resumed" || r.WorkerID != second.ID() || r.Attempts != 2 {
		t.Errorf("result %+v; want %q from the second worker on attempt 2", r, "resumed")
	}
	evs := metrics.waitEvents(t, 1)
	if len(evs) != 1 || evs[0].Outcome != classify.FateHandedBack || evs[0].Attempt != 1 {
		t.Errorf("first worker's events %+v; want one handed_back of attempt 1", evs)
	}
	if n := b.results.count(id); n != 1 {
		t.Errorf("%d results, want 1", n)
	}
}

// eventKey is what TestMetricsEvents compares of an event.
type eventKey struct {
	Tool       string
	Outcome    classify.Fate
	Class      envelope.Class
	Code       string
	Attempt    int
	Executed   bool
	Panicked   bool
	RetryDelay time.Duration
	DLQReason  classify.Fate
}

func keyOf(ev worker.Event) eventKey {
	return eventKey{ev.Tool, ev.Outcome, ev.Class, ev.Code, ev.Attempt, ev.Executed, ev.Panicked, ev.RetryDelay, ev.DLQReason}
}

func compareKeys(a, b eventKey) int {
	return cmp.Or(
		strings.Compare(a.Tool, b.Tool),
		cmp.Compare(a.Attempt, b.Attempt),
		strings.Compare(string(a.Outcome), string(b.Outcome)),
		strings.Compare(a.Code, b.Code),
	)
}

// Metrics.Observe gets exactly one event per delivery, with the outcome,
// class, code and attempt of each, for a scripted mix of calls.
func TestMetricsEvents(t *testing.T) {
	t.Parallel()
	// With a random source of 0.5 the jitter factor is exactly 1, so the
	// delays are 50ms after attempt 1 and 100ms after attempt 2.
	transient := func(n int) error { return classify.Transient(fmt.Errorf("upstream hiccup on attempt %d", n)) }
	failUntil := func(name string, okFrom int, maxAttempts int) tools.Tool {
		tl := tool(name, func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			if n := attemptOf(ctx); okFrom == 0 || n < okFrom {
				return tools.Output{}, transient(n)
			}
			return tools.Text("ok"), nil
		})
		tl.Retry.MaxAttempts = maxAttempts
		return tl
	}
	strict := textTool("strict", "never")
	strict.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	b := setup(t,
		textTool("ok", "fine"),
		strict,
		tool("missing", func(context.Context, json.RawMessage) (tools.Output, error) {
			return tools.Output{}, &classify.HTTPError{StatusCode: http.StatusNotFound, Header: http.Header{}}
		}),
		failUntil("wobbly", 3, 3),
		failUntil("broken", 0, 2),
		tool("boom", func(context.Context, json.RawMessage) (tools.Output, error) { panic("boom") }),
	)
	metrics := newRecorder()
	w := b.start(t, func(c *worker.Config) { c.Metrics = metrics; c.Rand = fixedRand(0.5) })

	withResult := []string{
		b.publish(t, "ok", `{}`),
		b.publish(t, "strict", `{"n":"x"}`),
		b.publish(t, "missing", `{}`),
		b.publish(t, "wobbly", `{}`),
		b.publish(t, "broken", `{}`),
		b.publish(t, "boom", `{}`),
		b.publish(t, "ok", `{}`, func(c *envelope.Call) {
			c.CreatedAt = time.Now().Add(-2 * time.Minute)
			c.Deadline = time.Now().Add(-time.Minute)
		}),
	}
	b.publishRaw(t, "ok", []byte(`{"v":1,"tool":"ok","input":{}}`), "")
	for _, id := range withResult {
		b.results.await(t, id)
	}
	const wantEvents = 11
	metrics.waitEvents(t, wantEvents)

	want := []eventKey{
		{Tool: "ok", Outcome: classify.FateSuccess, Attempt: 1, Executed: true},
		{Tool: "ok", Outcome: classify.FateDeadLetter, Class: envelope.ClassValidation, Code: "malformed", Attempt: 1, DLQReason: classify.FateMalformed},
		{Tool: "ok", Outcome: classify.FateDeadLetter, Class: envelope.ClassTransient, Code: classify.CodeDeadline, Attempt: 1, DLQReason: classify.FateExpired},
		{Tool: "strict", Outcome: classify.FateError, Class: envelope.ClassValidation, Code: classify.CodeInvalidArgument, Attempt: 1},
		{Tool: "missing", Outcome: classify.FateError, Class: envelope.ClassPermanent, Code: "http_404", Attempt: 1, Executed: true},
		{Tool: "wobbly", Outcome: classify.FateRetry, Class: envelope.ClassTransient, Code: classify.CodeTransient, Attempt: 1, Executed: true, RetryDelay: 50 * time.Millisecond},
		{Tool: "wobbly", Outcome: classify.FateRetry, Class: envelope.ClassTransient, Code: classify.CodeTransient, Attempt: 2, Executed: true, RetryDelay: 100 * time.Millisecond},
		{Tool: "wobbly", Outcome: classify.FateSuccess, Attempt: 3, Executed: true},
		{Tool: "broken", Outcome: classify.FateRetry, Class: envelope.ClassTransient, Code: classify.CodeTransient, Attempt: 1, Executed: true, RetryDelay: 50 * time.Millisecond},
		{Tool: "broken", Outcome: classify.FateDeadLetter, Class: envelope.ClassTransient, Code: classify.CodeTransient, Attempt: 2, Executed: true, DLQReason: classify.FateExhausted},
		{Tool: "boom", Outcome: classify.FateError, Class: envelope.ClassInternal, Code: classify.CodePanic, Attempt: 1, Executed: true, Panicked: true},
	}
	if len(want) != wantEvents {
		t.Fatalf("test bug: %d wanted events, wantEvents = %d", len(want), wantEvents)
	}

	// Stop waits for every delivery in hand, so no event can come later.
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	var got []eventKey
	for _, ev := range metrics.all() {
		got = append(got, keyOf(ev))
	}
	slices.SortFunc(got, compareKeys)
	slices.SortFunc(want, compareKeys)
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %d: %+v\nwant %d: %+v", len(got), got, len(want), want)
	}

	metrics.mu.Lock()
	defer metrics.mu.Unlock()
	for tl, n := range metrics.inFlight {
		if n != 0 {
			t.Errorf("in-flight gauge of %s ends at %d, want 0", tl, n)
		}
	}
	wantStarted := map[string]int{"ok": 1, "missing": 1, "wobbly": 3, "broken": 2, "boom": 1}
	for tl, n := range wantStarted {
		if metrics.started[tl] != n {
			t.Errorf("InFlight(+1) for %s called %d times, want %d (one per execution)", tl, metrics.started[tl], n)
		}
	}
	if n := metrics.started["strict"]; n != 0 {
		t.Errorf("InFlight(+1) for strict called %d times; a validation error executes nothing", n)
	}
}

// Every call Stop hands back is NAKed before Stop returns, so a process that
// closes its connection and exits right after Stop loses none: another
// worker gets them at once, not after the consumer's AckWait.
func TestStopHandsBackBeforeReturning(t *testing.T) {
	t.Parallel()
	const calls = 20
	var running atomic.Int64
	long := tool("long", func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
		if attemptOf(ctx) == 1 {
			running.Add(1)
			<-ctx.Done() // returns at once when the worker cancels it
			return tools.Output{}, ctx.Err()
		}
		return tools.Text("resumed"), nil
	})
	long.Timeout = time.Minute
	const ackWait = 5 * time.Minute // far beyond waitLong: only the NAKs can bring the calls back in time
	b := setup(t, long)
	metrics := newRecorder()
	first, firstConn := b.startConn(t, func(c *worker.Config) { c.WorkerID = "first"; c.Metrics = metrics; c.AckWait = ackWait })

	ids := make([]string, calls)
	for i := range ids {
		ids[i] = b.publish(t, "long", `{}`)
	}
	deadline := time.Now().Add(waitLong)
	for running.Load() < calls {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls started", running.Load(), calls)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := first.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want context.DeadlineExceeded", err)
	}
	// Each hand-back is observed right after its NAK: all must be in when
	// Stop returns, since a process closes its connection and exits then.
	handedBack, byCall := 0, 0
	for _, ev := range metrics.all() {
		if ev.Outcome == classify.FateHandedBack {
			handedBack++
			if ev.Executed {
				byCall++ // settled by the call's own goroutine, not by Stop
			}
		}
	}
	if handedBack != calls {
		t.Errorf("%d of %d calls handed back when Stop returned (%d of them by their own goroutines); "+
			"the others' NAKs race with the process's exit", handedBack, calls, byCall)
	}
	firstConn.Close() // as a process exiting after Stop would

	b.start(t, func(c *worker.Config) { c.WorkerID = "second"; c.AckWait = ackWait })
	for _, id := range ids {
		if r := b.results.await(t, id); r.IsError || r.WorkerID != "second" || r.Attempts != 2 {
			t.Errorf("call %s: result %+v; want success from the second worker on attempt 2", id, r)
		}
	}
}
