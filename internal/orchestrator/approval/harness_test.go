package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared and the tests run with -race.
const waitLong = 60 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// counts is a Metrics that counts.
type counts struct {
	held    atomic.Int64
	mu      sync.Mutex
	decided map[string]int
	pending atomic.Int64
}

func newCounts() *counts { return &counts{decided: map[string]int{}} }

func (c *counts) Held() { c.held.Add(1) }
func (c *counts) Decided(s string) {
	c.mu.Lock()
	c.decided[s]++
	c.mu.Unlock()
}
func (c *counts) Pending(n int) { c.pending.Store(int64(n)) }
func (c *counts) decidedOf(s approval.State) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decided[string(s)]
}

// replica is one process's Store on a connection of its own, with its
// metrics and its log.
type replica struct {
	s   *approval.Store
	js  js.JetStream
	m   *counts
	log *natstest.LockedBuffer
}

// jsOn is a JetStream context on a new connection to srv.
func jsOn(t *testing.T, srv *embedded.Server) js.JetStream {
	t.Helper()
	j, err := js.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// config is a Config on j that logs JSON lines to buf and counts in m.
func config(j js.JetStream, buf *natstest.LockedBuffer, m *counts) approval.Config {
	return approval.Config{
		JS: j, Metrics: m,
		Logger: slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// start starts a replica on srv; the test's cleanup stops it.
func start(t *testing.T, srv *embedded.Server) *replica {
	t.Helper()
	return startKeeping(t, srv, 0)
}

// startKeeping starts a replica on srv whose window of an approval's use
// is results (Config.ResultsMaxAge: 0 reads TOOL_RESULTS' max age).
func startKeeping(t *testing.T, srv *embedded.Server, results time.Duration) *replica {
	t.Helper()
	r := &replica{js: jsOn(t, srv), m: newCounts(), log: &natstest.LockedBuffer{}}
	cfg := config(r.js, r.log, r.m)
	cfg.ResultsMaxAge = results
	s, err := approval.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	r.s = s
	return r
}

// open is a Store opened as commands open it (no watch).
func open(t *testing.T, srv *embedded.Server) *replica {
	t.Helper()
	r := &replica{js: jsOn(t, srv), m: newCounts(), log: &natstest.LockedBuffer{}}
	s, err := approval.Open(ctxFor(t), config(r.js, r.log, r.m))
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	return r
}

var idSeq atomic.Int64

// call is a call to tool "deploy" with input, under a rule of timeout.
func call(input string, timeout time.Duration) *policy.Call {
	return &policy.Call{
		Tenant: "acme", Key: "ci-bot", Session: "sess-1", ID: fmt.Sprintf("toolu_%04d", idSeq.Add(1)),
		Tool: "deploy", Input: json.RawMessage(input),
		Info: pooltype.ToolInfo{Approval: &tools.ApprovalRule{Timeout: timeout}},
	}
}

// waitResult is what a Wait returned.
type waitResult struct {
	d   policy.Decision
	err error
}

// waitAsync runs Wait(id) on s; its result comes on the channel.
func waitAsync(ctx context.Context, s *approval.Store, id string) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		d, err := s.Wait(ctx, id)
		ch <- waitResult{d, err}
	}()
	return ch
}

// await is the result of a Wait started with waitAsync.
func await(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitLong):
		t.Fatal("the Wait never returned")
		return waitResult{}
	}
}

// The metrics package's Approvals is the store's Metrics.
var _ approval.Metrics = (*metrics.Approvals)(nil)

// jsNew is js.New.
var jsNew = js.New
