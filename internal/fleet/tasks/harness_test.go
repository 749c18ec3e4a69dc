package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gate is a tool that counts its executions per call id and blocks each
// until it is opened (or its ctx ends).
type gate struct {
	mu        sync.Mutex
	runs      map[string]int // executions per call id
	cancelled map[string]bool
	open      chan struct{}
	once      sync.Once
	started   chan string // each execution's call id
}

func newGate() *gate {
	return &gate{runs: map[string]int{}, cancelled: map[string]bool{}, open: make(chan struct{}), started: make(chan string, 64)}
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) runsOf(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[id]
}

func (g *gate) wasCancelled(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancelled[id]
}

func (g *gate) handler(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
	ci, _ := tools.CallInfoFrom(ctx)
	g.mu.Lock()
	g.runs[ci.ID]++
	g.mu.Unlock()
	g.started <- ci.ID
	select {
	case <-g.open:
		return tools.Text("done " + ci.ID), nil
	case <-ctx.Done():
		g.mu.Lock()
		g.cancelled[ci.ID] = true
		g.mu.Unlock()
		return tools.Output{}, ctx.Err()
	}
}

// fleet is a pool of one worker host and replicas: orchestrators on
// connections of their own to one JetStream, each with its store.
type fleet struct {
	t    *testing.T
	url  string
	reg  *tools.Registry
	gate *gate
}

// newFleet starts the server and the worker. The gate tool runs one call
// at a time (Concurrency 1, no margin): a turn's second call is held in
// its orchestrator's memory while the first runs.
func newFleet(t *testing.T) *fleet {
	t.Helper()
	srv, _, _ := natstest.StartProvisioned(t)
	f := &fleet{t: t, url: srv.ClientURL(), reg: tools.NewRegistry(), gate: newGate()}
	t.Cleanup(f.gate.release) // before the worker stops: its calls end
	err := f.reg.Register(tools.Tool{
		Name: "gate", Description: "blocks until the test opens it",
		InputSchema: json.RawMessage(`{"type":"object"}`), Concurrency: 1, Handler: f.gate.handler,
		Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Register(tools.Tool{
		Name: "big", Description: "answers a large text",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
			return tools.Text(string(make([]byte, 200<<10))), nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	pooltest.StartServer(t, f.url, f.reg)
	return f
}

// replica is an orchestrator and its store.
type replica struct {
	nc    *nats.Conn
	orch  *pooltest.Orchestrator
	store *tasks.Store
}

// replica starts an orchestrator named name on a connection of its own,
// and opens its store with a short lease.
func (f *fleet) replica(name string, mods ...func(*tasks.Config)) *replica {
	f.t.Helper()
	return f.replicaWith(name, nil, mods...)
}

// replicaWith is replica with dmod changing the dispatcher's config.
func (f *fleet) replicaWith(name string, dmod func(*dispatch.Config), mods ...func(*tasks.Config)) *replica {
	t := f.t
	t.Helper()
	nc := natstest.Connect(t, f.url)
	o := pooltest.StartOrchestrator(t, nc, discovery.RegistryCatalog(f.reg), func(c *pooltest.OrchestratorConfig) {
		c.Dispatch.Instance = name
		c.Dispatch.WindowMargin, c.Dispatch.StaleAfter = -1, -1
		if dmod != nil {
			dmod(&c.Dispatch)
		}
	})
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tasks.Config{Dispatcher: o.Dispatcher(), Instance: name, Lease: time.Second, Logger: natstest.Logger(t)}
	for _, m := range mods {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := tasks.Open(ctx, j, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { // before the orchestrator's: the store hands over, then the dispatcher stops
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return &replica{nc: nc, orch: o, store: s}
}

// calls are n calls to tool, with ids prefix-0, prefix-1, ...
func calls(tool, prefix string, n int) []envelope.ToolUseBlock {
	out := make([]envelope.ToolUseBlock, n)
	for i := range out {
		out[i] = envelope.ToolUseBlock{Type: "tool_use", ID: fmt.Sprintf("%s-%d", prefix, i), Name: tool, Input: json.RawMessage(`{}`)}
	}
	return out
}

// started waits for the gate's next execution and returns its call id.
func (f *fleet) started() string {
	f.t.Helper()
	select {
	case id := <-f.gate.started:
		return id
	case <-time.After(30 * time.Second):
		f.t.Fatal("no call reached the tool")
		return ""
	}
}

// waitState polls r's store until the task is in a final state.
func waitFinal(t *testing.T, s *tasks.Store, tenant, id string) tasks.Task {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		task, err := s.Wait(ctx, tenant, id, 5*time.Second)
		cancel()
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if task.State.Final() {
			return task
		}
	}
	t.Fatalf("task %s did not end", id)
	return tasks.Task{}
}

var _ tasks.Dispatcher = (*dispatch.Dispatcher)(nil)
