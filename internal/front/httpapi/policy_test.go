package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// fakeGate stands in for the policy gate: it records what a request's
// context tells the gate, fills the report with outcome (by tool name),
// and answers as fakeDispatcher does, or with err.
type fakeGate struct {
	fakeDispatcher
	outcome map[string]policy.CacheOutcome
	mu      sync.Mutex
	keys    []string
	fresh   []bool
	reports []bool
}

func (g *fakeGate) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	rep := policy.ReportFrom(ctx)
	g.mu.Lock()
	g.keys = append(g.keys, policy.KeyNameFrom(ctx))
	g.fresh = append(g.fresh, policy.NoCacheFrom(ctx))
	g.reports = append(g.reports, rep != nil)
	g.mu.Unlock()
	if rep != nil && g.outcome != nil {
		rep.Cache = make([]policy.CacheOutcome, len(calls))
		for i, c := range calls {
			rep.Cache[i] = g.outcome[c.Name]
		}
	}
	return g.fakeDispatcher.Dispatch(ctx, session, calls)
}

func (g *fakeGate) seen() (keys []string, fresh, reports []bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.keys...), append([]bool(nil), g.fresh...), append([]bool(nil), g.reports...)
}

const (
	namedToken   = "named-0123456789abcdef"
	unnamedToken = "unnamed-0123456789abcdef"
	echoOnly     = "echo-only-0123456789abcdef"
)

func policyKeys(t *testing.T) *apikey.Set {
	t.Helper()
	ks, err := apikey.Parse(nil, []byte(`[
  {tenant: acme, name: ci-bot, key: `+namedToken+`},
  {tenant: acme, key: `+unnamedToken+`},
  {tenant: acme, name: echoer, key: `+echoOnly+`, tools: [echo]}]`), "keys")
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

const twoCalls = `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo","input":{}},{"type":"tool_use","id":"b","name":"sleep","input":{"ms":1}}]}`

// The key's name and a request's wish for fresh results reach the gate.
func TestPolicyContext(t *testing.T) {
	t.Parallel()
	g := &fakeGate{}
	h := newTestHandler(t, &g.fakeDispatcher, func(c *Config) { c.Dispatcher, c.Keys = g, policyKeys(t) })
	cases := []struct {
		token string
		hdr   []string
		key   string
		fresh bool
	}{
		{namedToken, nil, "ci-bot", false},
		{unnamedToken, nil, "", false},
		{namedToken, []string{"Cache-Control", "no-cache"}, "ci-bot", true},
		{namedToken, []string{"Cache-Control", "max-age=60, No-Cache"}, "ci-bot", true},
		{namedToken, []string{"Cache-Control", "max-age=0"}, "ci-bot", true},
		{namedToken, []string{"Cache-Control", "no-store"}, "ci-bot", true},
		{namedToken, []string{"Pragma", "no-cache"}, "ci-bot", true},
		{namedToken, []string{"Cache-Control", "max-age=60"}, "ci-bot", false},
		{namedToken, []string{"Cache-Control", "no-cachex"}, "ci-bot", false},
	}
	for _, c := range cases {
		hdr := append([]string{"Authorization", "Bearer " + c.token}, c.hdr...)
		if w := do(h, "POST", "/v1/tool_calls", twoCalls, hdr...); w.Code != http.StatusOK {
			t.Fatalf("%v: %d %s", c.hdr, w.Code, w.Body)
		}
	}
	keys, fresh, reports := g.seen()
	if len(keys) != len(cases) {
		t.Fatalf("%d dispatches, want %d", len(keys), len(cases))
	}
	for i, c := range cases {
		if keys[i] != c.key || fresh[i] != c.fresh || !reports[i] {
			t.Errorf("%v: key %q, no-cache %v, report %v; want %q, %v, true", c.hdr, keys[i], fresh[i], reports[i], c.key, c.fresh)
		}
	}
}

// Toolpool-Cache: one outcome per call of the turn, "-" for a call whose
// tool does not cache or that was answered here; absent when none caches.
func TestCacheHeader(t *testing.T) {
	t.Parallel()
	g := &fakeGate{outcome: map[string]policy.CacheOutcome{"echo": policy.CacheHit}}
	h := newTestHandler(t, &g.fakeDispatcher, func(c *Config) { c.Dispatcher, c.Keys = g, policyKeys(t) })
	w := do(h, "POST", "/v1/tool_calls", twoCalls, "Authorization", "Bearer "+namedToken)
	if got := w.Header().Get(HeaderCache); w.Code != http.StatusOK || got != "hit,-" {
		t.Errorf("hit and none: %d %q", w.Code, got)
	}
	// A key that may not call sleep: sleep is answered here, the others
	// keep their positions.
	three := `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo","input":{"text":"x"}},` +
		`{"type":"tool_use","id":"b","name":"sleep","input":{"ms":1}},{"type":"tool_use","id":"c","name":"echo","input":{"text":"y"}}]}`
	g.outcome["echo"] = policy.CacheCoalesced
	w = do(h, "POST", "/v1/tool_calls", three, "Authorization", "Bearer "+echoOnly)
	if got := w.Header().Get(HeaderCache); w.Code != http.StatusOK || got != "coalesced,-,coalesced" {
		t.Errorf("with a call answered here: %d %q", w.Code, got)
	}
	for o, want := range map[policy.CacheOutcome]string{policy.CacheMiss: "miss,-", policy.CacheBypass: "bypass,-"} {
		g.outcome["echo"] = o
		if got := do(h, "POST", "/v1/tool_calls", twoCalls, "Authorization", "Bearer "+namedToken).Header().Get(HeaderCache); got != want {
			t.Errorf("%s: %q", want, got)
		}
	}
	g.outcome = map[string]policy.CacheOutcome{}
	if w := do(h, "POST", "/v1/tool_calls", twoCalls, "Authorization", "Bearer "+namedToken); w.Header().Values(HeaderCache) != nil {
		t.Errorf("no call caches: %q", w.Header().Values(HeaderCache))
	}
}

// exhausted is the gate's refusal of a whole turn, each call's result
// the budget's words.
func exhausted(calls ...[2]string) *policy.ExhaustedError {
	b := classify.Budget{Name: "daily", Limit: 100, Spent: 100, Period: "per day", ResetIn: 90*time.Second + 200*time.Millisecond}
	ex := &policy.ExhaustedError{RetryAfter: b.ResetIn}
	for _, c := range calls {
		b.Tool = c[1]
		ex.Results = append(ex.Results, envelope.Result{V: 1, CallID: c[0], Tool: c[1], IsError: true, Class: envelope.ClassTransient,
			Code: classify.CodeBudgetExhausted, Content: envelope.Text(classify.BudgetExhaustedMessage(b))})
	}
	return ex
}

// A turn every call of which is over a budget: 429, Retry-After the
// reset rounded up, and the turn's answer in the request's format.
func TestOverBudgetIs429WithAnAnswer(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{err: exhausted([2]string{"a", "echo"}, [2]string{"b", "sleep"})}
	var counted []string
	h := newTestHandler(t, f, func(c *Config) {
		c.Metrics = metricsFunc(func(_, outcome string, n int) { counted = append(counted, outcome) })
	})
	w := do(h, "POST", "/v1/tool_calls", twoCalls)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "91" || w.Header().Get(HeaderErrorIndexes) != "0,1" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	var msg UserMessage
	if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil || len(msg.Content) != 2 {
		t.Fatalf("body %s", w.Body)
	}
	for i, tool := range []string{"echo", "sleep"} {
		b := msg.Content[i]
		if !b.IsError || !strings.HasPrefix(b.Content.Text(), "The call to "+tool+` was not run: the budget "daily" allows 100 calls per day`) {
			t.Errorf("block %d: %+v", i, b)
		}
	}
	if len(counted) != 1 || counted[0] != OutcomeOverBudget {
		t.Errorf("metrics %v", counted)
	}
	// OpenAI's format, one call.
	f.err = exhausted([2]string{"c", "echo"})
	w = do(h, "POST", "/v1/tool_calls", `{"tool_calls":[{"id":"c","function":{"name":"echo","arguments":"{}"}}]}`)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"content":"Error: The call to echo was not run: the budget \"daily\"`) {
		t.Errorf("openai: %d %s", w.Code, w.Body)
	}
	// A gate that answers with the wrong number of results is a bug, not
	// an answer.
	f.err = exhausted([2]string{"a", "echo"})
	if w := do(h, "POST", "/v1/tool_calls", twoCalls); w.Code != http.StatusInternalServerError {
		t.Errorf("mismatched results: %d %s", w.Code, w.Body)
	}
}

// A restricted key's turn over budget: the calls answered here keep their
// answers, the refused ones get the gate's.
func TestOverBudgetWithLocalAnswers(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{err: exhausted([2]string{"a", "echo"})}
	h := newTestHandler(t, f, func(c *Config) { c.Keys = policyKeys(t) })
	w := do(h, "POST", "/v1/tool_calls", twoCalls, "Authorization", "Bearer "+echoOnly)
	var msg UserMessage
	if w.Code != http.StatusTooManyRequests || json.Unmarshal(w.Body.Bytes(), &msg) != nil || len(msg.Content) != 2 ||
		!strings.Contains(msg.Content[0].Content.Text(), "budget") || !strings.Contains(msg.Content[1].Content.Text(), "There is no tool named sleep") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

type metricsFunc func(tenant, outcome string, n int)

func (metricsFunc) Refused(string)                            {}
func (f metricsFunc) ToolCalls(tenant, outcome string, n int) { f(tenant, outcome, n) }

// fakeTasks is a TaskStore whose Start returns err, recording requests.
type fakeTasks struct {
	mu   sync.Mutex
	reqs []tasks.Request
	err  error
}

func (f *fakeTasks) Start(_ context.Context, req tasks.Request) (tasks.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if f.err != nil {
		return tasks.Task{}, f.err
	}
	return tasks.Task{ID: "t1", State: tasks.StateWorking, Created: time.Now(), PollInterval: time.Second, Request: req}, nil
}

func (f *fakeTasks) Get(context.Context, string, string) (tasks.Task, error) {
	return tasks.Task{}, tasks.ErrNotFound
}

func (f *fakeTasks) Wait(context.Context, string, string, time.Duration) (tasks.Task, error) {
	return tasks.Task{}, tasks.ErrNotFound
}

func (f *fakeTasks) Cancel(context.Context, string, string) (tasks.Task, error) {
	return tasks.Task{}, tasks.ErrNotFound
}

// An async POST keeps the key's name and the wish for fresh results in
// its task; one every call of which is over a budget is refused at once
// with 429, as a synchronous one, and nothing is kept.
func TestAsyncPolicy(t *testing.T) {
	t.Parallel()
	ft := &fakeTasks{}
	h := newTestHandler(t, &fakeDispatcher{}, func(c *Config) { c.Tasks, c.Keys = ft, policyKeys(t) })
	w := do(h, "POST", "/v1/tool_calls", twoCalls, "Authorization", "Bearer "+namedToken, "Prefer", "respond-async", "Cache-Control", "no-cache")
	if w.Code != http.StatusAccepted || len(ft.reqs) != 1 || ft.reqs[0].KeyName != "ci-bot" || !ft.reqs[0].NoCache {
		t.Fatalf("accepted: %d %s %+v", w.Code, w.Body, ft.reqs)
	}
	ft.err = exhausted([2]string{"a", "echo"})
	w = do(h, "POST", "/v1/tool_calls", twoCalls, "Authorization", "Bearer "+echoOnly, "Prefer", "respond-async")
	var msg UserMessage
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "91" || w.Header().Get("Location") != "" ||
		json.Unmarshal(w.Body.Bytes(), &msg) != nil || len(msg.Content) != 2 ||
		!strings.Contains(msg.Content[0].Content.Text(), `the budget "daily"`) || !strings.Contains(msg.Content[1].Content.Text(), "no tool named sleep") {
		t.Fatalf("over budget: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if ft.reqs[1].KeyName != "echoer" || ft.reqs[1].NoCache {
		t.Errorf("second request %+v", ft.reqs[1])
	}
}
