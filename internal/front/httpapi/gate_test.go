package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// The HTTP API with the real policy gate in front of a fake dispatcher,
// its budgets and cache in memory (the JetStream ones are the budget and
// rescache packages'): Toolpool-Cache from the gate's report, 429 from its
// ExhaustedError, the key's name and no-cache as the gate reads them.

type gateCatalog map[string]pooltype.ToolInfo

func (c gateCatalog) Lookup(_ context.Context, name string) (pooltype.ToolInfo, bool) {
	info, ok := c[name]
	return info, ok
}

func (c gateCatalog) Names(context.Context) []string { return nil }

// memBudget allows limit calls of the key named key, then refuses.
type memBudget struct {
	key   string
	limit int64
	mu    sync.Mutex
	spent int64
}

func (b *memBudget) Active(_, key string) bool { return key == b.key }

func (b *memBudget) Charge(_ context.Context, c *policy.Call) (policy.Spend, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.Key != b.key {
		return noSpend{}, nil
	}
	if b.spent >= b.limit {
		return nil, &policy.Exhausted{Budget: classify.Budget{Name: "ci-daily", Tool: c.Tool, Limit: b.limit, Spent: b.spent,
			Period: "per day", ResetIn: 2*time.Hour + 500*time.Millisecond}}
	}
	b.spent++
	return noSpend{}, nil
}

type noSpend struct{}

func (noSpend) Refund(context.Context)    {}
func (noSpend) Nearly() []classify.Budget { return nil }

// memCache is a result cache without coalescing.
type memCache struct {
	mu sync.Mutex
	m  map[string]envelope.Result
}

func (c *memCache) Key(call *policy.Call) (string, bool) {
	return call.Tool + " " + string(call.Input), true
}

func (c *memCache) Get(_ context.Context, key string) (envelope.Result, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[key]
	return r, ok, nil
}

func (c *memCache) Put(_ context.Context, key string, res *envelope.Result, _ time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = *res
	return nil
}

func (c *memCache) Claim(context.Context, string, time.Duration) (bool, error) { return true, nil }
func (c *memCache) Release(context.Context, string, *envelope.Result)          {}
func (c *memCache) Await(context.Context, string) (envelope.Result, bool, error) {
	return envelope.Result{}, false, nil
}

func TestThroughTheGate(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{}
	g, err := policy.New(policy.Config{Next: f, Budgets: &memBudget{key: "ci-bot", limit: 2}, Cache: &memCache{m: map[string]envelope.Result{}},
		Catalog: gateCatalog{"echo": {Cache: &tools.CachePolicy{TTL: time.Minute}}, "sleep": {}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, f, func(c *Config) { c.Dispatcher, c.Keys = g, policyKeys(t) })
	post := func(token string, hdr ...string) *http.Response {
		w := do(h, "POST", "/v1/tool_calls", twoCalls, append([]string{"Authorization", "Bearer " + token}, hdr...)...)
		return w.Result()
	}
	// Without a budget: echo misses, then hits; sleep does not cache.
	if r := post(unnamedToken); r.StatusCode != http.StatusOK || r.Header.Get(HeaderCache) != "miss,-" {
		t.Fatalf("first: %d %v", r.StatusCode, r.Header)
	}
	if r := post(unnamedToken); r.Header.Get(HeaderCache) != "hit,-" {
		t.Fatalf("second: %v", r.Header)
	}
	if r := post(unnamedToken, "Cache-Control", "no-cache"); r.Header.Get(HeaderCache) != "bypass,-" {
		t.Fatalf("no-cache: %v", r.Header)
	}
	// The named key's budget of 2: a hit costs nothing, sleep costs 1.
	if r := post(namedToken); r.StatusCode != http.StatusOK || r.Header.Get(HeaderCache) != "hit,-" {
		t.Fatalf("ci-bot 1: %d %v", r.StatusCode, r.Header)
	}
	if r := post(namedToken, "Pragma", "no-cache"); r.StatusCode != http.StatusOK || r.Header.Get(HeaderCache) != "bypass,-" {
		t.Fatalf("ci-bot 2: %d %v", r.StatusCode, r.Header)
	}
	// Spent: both calls over budget, the turn is a 429 with the reset.
	w := do(h, "POST", "/v1/tool_calls", twoCalls, "Authorization", "Bearer "+namedToken, "Cache-Control", "no-cache")
	var msg UserMessage
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "7201" || json.Unmarshal(w.Body.Bytes(), &msg) != nil || len(msg.Content) != 2 ||
		!strings.Contains(msg.Content[0].Content.Text(), `the budget "ci-daily" allows 2 calls per day`) {
		t.Fatalf("over budget: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// Another key of the tenant is not on that budget.
	if r := post(unnamedToken); r.StatusCode != http.StatusOK {
		t.Fatalf("the other key: %d", r.StatusCode)
	}
}
