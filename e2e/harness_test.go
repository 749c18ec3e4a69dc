package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared and the tests run with -race.
const waitLong = 60 * time.Second

// pool is one test's toolpool: an embedded JetStream server with the
// streams provisioned, a registry of tools, and a started dispatcher whose
// catalog is that registry. Workers are started separately, each on its own
// connection.
type pool struct {
	t   *testing.T
	srv *embedded.Server
	nc  *nats.Conn
	js  js.JetStream
	reg *tools.Registry
	d   *dispatch.Dispatcher
	o   *pooltest.Orchestrator // d's
}

// newPool starts a pool serving ts. Everything stops when the test ends.
func newPool(t *testing.T, ts ...tools.Tool) *pool {
	t.Helper()
	srv, nc, j := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	for _, tool := range ts {
		if err := reg.Register(tool); err != nil {
			t.Fatalf("register %s: %v", tool.Name, err)
		}
	}
	p := &pool{t: t, srv: srv, nc: nc, js: j, reg: reg}
	p.o = pooltest.StartOrchestrator(t, nc, discovery.RegistryCatalog(reg))
	p.d = p.o.Dispatcher()
	return p
}

// startDispatcher starts an orchestrator on j's connection, stopped when
// the test ends, and returns its dispatcher.
func startDispatcher(t *testing.T, j js.JetStream, cat dispatch.Catalog) *dispatch.Dispatcher {
	t.Helper()
	return pooltest.StartOrchestrator(t, j.Conn(), cat).Dispatcher()
}

// startWorker starts a worker for the pool's registry on a connection of
// its own. mods may change its config. The worker is stopped when the test
// ends; a stop that does not finish cleanly is logged, not failed (a test
// may have killed the worker's connection on purpose).
func (p *pool) startWorker(mods ...func(*worker.Config)) *worker.Worker {
	p.t.Helper()
	w, _ := startWorkerOn(p.t, p.srv.ClientURL(), p.reg, mods...)
	return w
}

// startWorkerOn starts a server of one worker serving reg on a new
// connection to url (pooltest.StartServer), and returns the worker with its
// connection.
func startWorkerOn(t *testing.T, url string, reg *tools.Registry, mods ...func(*worker.Config)) (*worker.Worker, *nats.Conn) {
	t.Helper()
	s := pooltest.StartServer(t, url, reg, func(c *pooltest.ServerConfig) {
		for _, m := range mods {
			m(&c.Worker)
		}
	})
	return s.Workers()[0], s.Conn()
}

var callSeq atomic.Int64

// newCallID returns a tool_use id unique in the test binary.
func newCallID() string {
	return fmt.Sprintf("toolu_e2e_%06d", callSeq.Add(1))
}

// toolUse is a tool_use block with a fresh id.
func toolUse(tool, input string) envelope.ToolUseBlock {
	return envelope.ToolUseBlock{Type: "tool_use", ID: newCallID(), Name: tool, Input: json.RawMessage(input)}
}

// call dispatches one call and returns its result.
func (p *pool) call(tool, input string) envelope.Result {
	p.t.Helper()
	return p.callBlock(toolUse(tool, input))
}

// callBlock dispatches b alone and returns its result.
func (p *pool) callBlock(b envelope.ToolUseBlock) envelope.Result {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	res, err := p.d.Dispatch(ctx, "", []envelope.ToolUseBlock{b})
	if err != nil {
		p.t.Fatalf("Dispatch %s: %v", b.Name, err)
	}
	if len(res) != 1 {
		p.t.Fatalf("Dispatch %s: %d results, want 1", b.Name, len(res))
	}
	if res[0].CallID != b.ID {
		p.t.Fatalf("Dispatch %s: result for call %q, want %q", b.Name, res[0].CallID, b.ID)
	}
	return res[0]
}

// streamState returns the state of stream name.
func streamState(t *testing.T, j js.JetStream, name string) js.StreamState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", name, err)
	}
	return info.State
}

// streamMsgs returns the messages stored in stream name, oldest first,
// whose subject is subject (all when subject is ""; a subject ending in
// ".>" matches what it starts with).
func streamMsgs(t *testing.T, j js.JetStream, name, subject string) []*js.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", name, err)
	}
	var msgs []*js.RawStreamMsg
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, js.ErrMsgNotFound) {
			continue // deleted
		}
		if err != nil {
			t.Fatalf("stream %s message %d: %v", name, seq, err)
		}
		if subject == "" || m.Subject == subject ||
			strings.HasSuffix(subject, ".>") && strings.HasPrefix(m.Subject, strings.TrimSuffix(subject, ">")) {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// eventually polls cond until it is true, failing the test after waitLong.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, waitLong, what, cond)
}

// objectSchema is an input schema with the given properties JSON and
// required names.
func objectSchema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":` + props + `,"required":` + string(req) + `}`)
}

// anySchema accepts any object.
var anySchema = json.RawMessage(`{"type":"object"}`)

// attemptOf is the 1-based attempt of the call a handler runs.
func attemptOf(ctx context.Context) int {
	ci, ok := tools.CallInfoFrom(ctx)
	if !ok {
		return 0
	}
	return ci.Attempt
}

// span is when one attempt of a handler ran.
type span struct{ start, end time.Time }

// attemptClock records when each attempt of a tool's handler started and
// ended, by attempt number, on the handler's side of the worker.
type attemptClock struct {
	mu    sync.Mutex
	spans map[int]span
}

func newAttemptClock() *attemptClock { return &attemptClock{spans: map[int]span{}} }

func (c *attemptClock) started(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans[n] = span{start: time.Now()}
}

func (c *attemptClock) ended(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.spans[n]
	s.end = time.Now()
	c.spans[n] = s
}

func (c *attemptClock) get(n int) span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spans[n]
}

// recordingMetrics is a worker.Metrics that keeps every event.
type recordingMetrics struct {
	mu       sync.Mutex
	events   []worker.Event
	inFlight map[string]int
}

func newRecordingMetrics() *recordingMetrics {
	return &recordingMetrics{inFlight: map[string]int{}}
}

func (m *recordingMetrics) Observe(ev worker.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, ev)
}

func (m *recordingMetrics) InFlight(tool string, delta int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight[tool] += delta
}

func (m *recordingMetrics) all() []worker.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events)
}

// fixedRand is a classify.Rand that always returns its value.
type fixedRand float64

func (r fixedRand) Float64() float64 { return float64(r) }

var _ classify.Rand = fixedRand(0)

// assertModelSafe fails when content shows internals to the model: stack
// traces, Go type or package names, or any of the extra strings given.
func assertModelSafe(t *testing.T, content string, extra ...string) {
	t.Helper()
	for _, bad := range append([]string{
		"goroutine ", "panic(", ".go:", "runtime.", "runtime error", "*classify.", "classify.", "*errors.",
		"*fs.PathError", "*net.OpError", "PanicError", "HTTPError", "TimeoutError", "context deadline exceeded",
	}, extra...) {
		if strings.Contains(content, bad) {
			t.Errorf("content shows %q to the model: %q", bad, content)
		}
	}
}

// dispatchAsync dispatches blocks in a goroutine; the turn's results (or
// error) arrive on the returned channel.
func (p *pool) dispatchAsync(ctx context.Context, blocks ...envelope.ToolUseBlock) <-chan turnResult {
	ch := make(chan turnResult, 1)
	go func() {
		res, err := p.d.Dispatch(ctx, "", blocks)
		ch <- turnResult{res, err}
	}()
	return ch
}

// turnResult is what one Dispatch returned.
type turnResult struct {
	results []envelope.Result
	err     error
}

// await waits for a dispatchAsync turn.
func await(t *testing.T, ch <-chan turnResult) []envelope.Result {
	t.Helper()
	select {
	case tr := <-ch:
		if tr.err != nil {
			t.Fatalf("Dispatch: %v", tr.err)
		}
		return tr.results
	case <-time.After(waitLong + 10*time.Second):
		t.Fatal("Dispatch did not return")
		return nil
	}
}
