package budget_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a test's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is an embedded server and an admin connection to it.
type fixture struct {
	url string
	nc  *nats.Conn
	js  js.JetStream
}

func setup(t *testing.T) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{url: srv.ClientURL(), nc: nc, js: j}
}

// replica is a Store on a connection of its own, as one orchestrator.
type replica struct {
	*budget.Store
	nc      *nats.Conn
	metrics *fakeMetrics
}

func (f *fixture) replica(t *testing.T, now func() time.Time) *replica {
	t.Helper()
	nc := natstest.Connect(t, f.url)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMetrics{spent: map[string]int64{}, refused: map[string]int{}}
	s, err := budget.New(budget.Config{JS: j, Logger: natstest.Logger(t), Metrics: m, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return &replica{Store: s, nc: nc, metrics: m}
}

// set defines d, and waits until every replica knows it.
func (f *fixture) set(t *testing.T, d budget.Def, rs ...*replica) {
	t.Helper()
	if err := budget.Set(t.Context(), f.js, d); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		natstest.Eventually(t, 5*time.Second, "replica knows budget "+d.Name, func() bool {
			for _, have := range r.Defs() {
				if have.Name == d.Name && have.Limit == d.Limit && have.ResetAt.Equal(mustGet(t, f, d.Name).ResetAt) {
					return true
				}
			}
			return false
		})
	}
}

func mustGet(t *testing.T, f *fixture, name string) budget.Def {
	t.Helper()
	d, err := budget.Get(t.Context(), f.js, name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// call is a call of tool by tenant (and key), of cost.
func call(tenant, key, tool string, cost int) *policy.Call {
	return &policy.Call{Tenant: tenant, Key: key, Session: "s", ID: "toolu_1", Tool: tool, Input: []byte(`{}`),
		Info: pooltype.ToolInfo{Name: tool, Cost: cost}}
}

type fakeMetrics struct {
	mu      sync.Mutex
	spent   map[string]int64
	refused map[string]int
}

func (m *fakeMetrics) Spent(b string, spent, _ int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spent[b] = spent
}

func (m *fakeMetrics) Refused(b string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused[b]++
}

func (m *fakeMetrics) refusedOf(b string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused[b]
}

// the Prometheus implementation the orchestrator registers
var _ budget.Metrics = (*metrics.Budget)(nil)
