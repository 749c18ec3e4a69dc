package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// fairCatalog is a Catalog whose tools have slots and per-key limits, as
// the live catalog reports them from the workers' announcements.
type fairCatalog map[string]ToolInfo

func (c fairCatalog) Lookup(_ context.Context, name string) (ToolInfo, bool) {
	info, ok := c[name]
	info.Name = name
	return info, ok
}

func (c fairCatalog) Names(context.Context) []string {
	var names []string
	for n := range c {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// gateWorker is a worker of tool that holds every call until the test
// opens the gate for it (one call per open), counting the calls running
// per tenant and the most ever running at once.
type gateWorker struct {
	*fakeWorker
	gate chan struct{}

	mu      sync.Mutex
	order   []string // call ids, in the order they reached the worker
	running map[string]int
	maxRun  map[string]int
}

func startGateWorker(t *testing.T, b *testBundle, tool string) *gateWorker {
	g := &gateWorker{gate: make(chan struct{}, 10_000), running: map[string]int{}, maxRun: map[string]int{}}
	g.fakeWorker = startWorker(t, b, tool, func(w *fakeWorker, c *envelope.Call, _ nats.Header, reply reply) {
		g.mu.Lock()
		g.order = append(g.order, c.ID)
		g.running[c.Tenant]++
		g.maxRun[c.Tenant] = max(g.maxRun[c.Tenant], g.running[c.Tenant])
		g.mu.Unlock()
		w.Go(func(done <-chan struct{}) {
			select {
			case <-g.gate:
			case <-done:
				return
			}
			g.mu.Lock()
			g.running[c.Tenant]--
			g.mu.Unlock()
			reply(&envelope.Result{Content: envelope.Text("done " + c.ID)}, msgID(c))
		})
	})
	return g
}

func (g *gateWorker) arrived() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.order)
}

func (g *gateWorker) open(n int) {
	for range n {
		g.gate <- struct{}{}
	}
}

// dispatchAsync runs one single-call turn of tenant in the background;
// its result comes on the returned channel.
func dispatchAsync(t *testing.T, d *Dispatcher, ctx context.Context, tenant, id, tool string) <-chan envelope.Result {
	ch := make(chan envelope.Result, 1)
	go func() {
		res, err := d.Dispatch(WithTenant(ctx, tenant), "", []envelope.ToolUseBlock{use(id, tool, `{}`)})
		if err != nil {
			t.Errorf("dispatch %s: %v", id, err)
			ch <- envelope.Result{}
			return
		}
		ch <- res[0]
	}()
	return ch
}

// toolStats is tool's part of d's snapshot.
func toolStats(d *Dispatcher, tool string) sched.ToolStats {
	for _, ts := range d.SchedSnapshot().Tools {
		if ts.Tool == tool {
			return ts
		}
	}
	return sched.ToolStats{}
}

// noMargin makes a tool's window its slots, and no call go stale (the
// tests hold calls at the worker for as long as they need).
func noMargin(c *Config) { c.WindowMargin, c.StaleAfter = -1, -1 }

// With a tool of few slots and a backlog of tenant A, tenant B's call runs
// before A's backlog drains: the next free slot but one goes to B.
func TestFairShareServesOtherTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin, func(c *Config) { c.Catalog = fairCatalog{"slow": {Slots: 2}} })
	g := startGateWorker(t, b, "slow")
	ctx := timeout(t, 30*time.Second)
	const backlog = 20
	var results []<-chan envelope.Result
	for i := range backlog {
		results = append(results, dispatchAsync(t, b.d, ctx, "A", fmt.Sprintf("a_%02d", i), "slow"))
	}
	eventually(t, "A's backlog held by the scheduler", func() bool {
		ts := toolStats(b.d, "slow")
		return ts.InFlight == 2 && ts.Waiting == backlog-2 && len(g.arrived()) == 2
	})
	if ts := toolStats(b.d, "slow"); ts.Window != 2 {
		t.Errorf("window %d, want the 2 slots", ts.Window)
	}
	results = append(results, dispatchAsync(t, b.d, ctx, "B", "b_0", "slow"))
	eventually(t, "B's call waiting", func() bool { return toolStats(b.d, "slow").Waiting == backlog-1 })
	// One call ends at a time, so the calls reach the worker in the order
	// the scheduler grants them (each grant is published by its own turn).
	for n := 3; n <= backlog+1; n++ {
		g.open(1)
		eventually(t, "the next call at the worker", func() bool { return len(g.arrived()) == n })
	}
	g.open(2)
	for _, ch := range results {
		if r := <-ch; r.IsError || !strings.HasPrefix(r.Content.Text(), "done ") {
			t.Errorf("result %+v", r)
		}
	}
	order := g.arrived()
	pos := slices.Index(order, "b_0")
	// Two of A's calls ran when B came; B is granted within the next two.
	if pos < 0 || pos > 3 {
		t.Errorf("B's call reached the worker %dth of %d: %v", pos+1, len(order), order)
	}
	if ts := toolStats(b.d, "slow"); ts.InFlight != 0 || ts.Waiting != 0 {
		t.Errorf("tickets left: %+v", ts)
	}
}

// A per-key concurrency cap is never exceeded: the worker never runs more
// of one tenant's calls at once, while another tenant's pass.
func TestFairShareCapNeverExceeded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.Catalog = fairCatalog{"slow": {Slots: 50, PerKey: tools.KeyLimits{Concurrency: 3}}}
	})
	g := startGateWorker(t, b, "slow")
	ctx := timeout(t, 30*time.Second)
	var results []<-chan envelope.Result
	for i := range 12 {
		results = append(results, dispatchAsync(t, b.d, ctx, "A", fmt.Sprintf("a_%02d", i), "slow"))
	}
	results = append(results, dispatchAsync(t, b.d, ctx, "B", "b_0", "slow"))
	eventually(t, "A at its cap, B running", func() bool {
		ts := toolStats(b.d, "slow")
		return ts.InFlight == 4 && ts.Limited == 9 && len(g.arrived()) == 4
	})
	// Open the gate one call at a time, so the dispatcher grants as the
	// calls finish.
	for range 13 {
		g.open(1)
	}
	for _, ch := range results {
		if r := <-ch; r.IsError {
			t.Errorf("result %+v", r)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.maxRun["A"] != 3 || g.maxRun["B"] != 1 {
		t.Errorf("most running at once: A %d, B %d; want 3 (the cap) and 1", g.maxRun["A"], g.maxRun["B"])
	}
}

// A high-priority call starts before every waiting low-priority call.
func TestFairSharePriorityOvertakes(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin, func(c *Config) { c.Catalog = fairCatalog{"slow": {Slots: 1}} })
	g := startGateWorker(t, b, "slow")
	ctx := timeout(t, 30*time.Second)
	var results []<-chan envelope.Result
	results = append(results, dispatchAsync(t, b.d, ctx, "L", "first", "slow"))
	eventually(t, "the first call running", func() bool { return len(g.arrived()) == 1 })
	low := WithPriority(ctx, PriorityLow)
	for i := range 5 {
		results = append(results, dispatchAsync(t, b.d, low, "L", fmt.Sprintf("low_%d", i), "slow"))
	}
	eventually(t, "the low calls waiting", func() bool { return toolStats(b.d, "slow").Waiting == 5 })
	results = append(results, dispatchAsync(t, b.d, WithPriority(ctx, PriorityHigh), "H", "high", "slow"))
	eventually(t, "the high call waiting", func() bool { return toolStats(b.d, "slow").Waiting == 6 })
	g.open(7)
	for _, ch := range results {
		<-ch
	}
	if order := g.arrived(); order[1] != "high" {
		t.Errorf("order %v: want high second", order)
	}
}

// A call held by its key's limit at its deadline is told the limit and
// when to try again (Retry-After); the tool's other keys still run.
func TestFairShareLimitWordsAtDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.Catalog = fairCatalog{
			"slow": {Slots: 10, PerKey: tools.KeyLimits{Concurrency: 1}},
			"echo": {Slots: 10, PerKey: tools.KeyLimits{Rate: 1, Per: time.Minute}},
		}
	})
	g := startGateWorker(t, b, "slow")
	startWorker(t, b, "echo", echoText)
	hold := timeout(t, 30*time.Second)
	first := dispatchAsync(t, b.d, hold, "A", "cap_1", "slow")
	eventually(t, "A's first call running", func() bool { return len(g.arrived()) == 1 })

	res, err := b.d.Dispatch(WithTenant(timeout(t, time.Second), "A"), "", []envelope.ToolUseBlock{use("cap_2", "slow", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	text := r.Content.Text()
	if !r.IsError || r.Class != envelope.ClassTransient || r.Code != classify.CodeKeyConcurrency || r.RetryAfter < time.Second ||
		!strings.Contains(text, "at most 1 call to slow running at once") || !strings.Contains(text, "try the call again in") {
		t.Errorf("held by the cap: %+v (%s)", r, text)
	}

	// The rate: one call per minute; the second waits until its deadline.
	if res, err := b.d.Dispatch(WithTenant(timeout(t, 10*time.Second), "A"), "", []envelope.ToolUseBlock{use("rate_1", "echo", `{"text":"x"}`)}); err != nil || res[0].IsError {
		t.Fatalf("first call within the rate: %v %+v", err, res)
	}
	res, err = b.d.Dispatch(WithTenant(timeout(t, time.Second), "A"), "", []envelope.ToolUseBlock{use("rate_2", "echo", `{"text":"y"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r = res[0]
	if !r.IsError || r.Code != classify.CodeKeyRate || r.RetryAfter < 50*time.Second || r.RetryAfter > time.Minute ||
		!strings.Contains(r.Content.Text(), "at most 1 call to echo per minute") {
		t.Errorf("held by the rate: %+v (%s)", r, r.Content.Text())
	}
	// Another tenant has its own bucket.
	if res, err := b.d.Dispatch(WithTenant(timeout(t, 10*time.Second), "B"), "", []envelope.ToolUseBlock{use("rate_b", "echo", `{"text":"b"}`)}); err != nil || res[0].IsError {
		t.Fatalf("another tenant's call: %v %+v", err, res)
	}
	g.open(1)
	<-first
	if got := b.metrics.get("expired", "slow"); got != 1 {
		t.Errorf("expired slow %d, want 1", got)
	}
}

// A call waiting for its fair share at its deadline is told the tool was
// busy with other calls.
func TestFairShareBusyWordsAtDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin, func(c *Config) { c.Catalog = fairCatalog{"slow": {Slots: 1}} })
	g := startGateWorker(t, b, "slow")
	first := dispatchAsync(t, b.d, timeout(t, 30*time.Second), "A", "busy_1", "slow")
	eventually(t, "the first call running", func() bool { return len(g.arrived()) == 1 })
	res, err := b.d.Dispatch(WithTenant(timeout(t, 500*time.Millisecond), "B"), "", []envelope.ToolUseBlock{use("busy_2", "slow", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; !r.IsError || r.Code != classify.CodeFairShare || r.RetryAfter < time.Second ||
		!strings.Contains(r.Content.Text(), "busy with other calls") {
		t.Errorf("held by fair share: %+v (%s)", r, r.Content.Text())
	}
	if ts := toolStats(b.d, "slow"); ts.Waiting != 0 || ts.InFlight != 1 {
		t.Errorf("after the deadline: %+v", ts)
	}
	g.open(1)
	<-first
	if got := g.arrived(); len(got) != 1 {
		t.Errorf("the expired call ran: %v", got)
	}
}

// Two dispatchers on one NATS see each other and split a cap: each lets
// half of a key's cap run.
func TestFairShareReplicasSplitCap(t *testing.T) {
	t.Parallel()
	cat := fairCatalog{"slow": {Slots: 100, PerKey: tools.KeyLimits{Concurrency: 4}}}
	mod := func(c *Config) { c.Catalog = cat; c.PresenceInterval = 100 * time.Millisecond }
	b := setup(t, mod)
	cfg := Config{JS: b.js, Logger: b.d.log, Instance: "orch-second"}
	mod(&cfg)
	d2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopNow(d2) })
	eventually(t, "two replicas", func() bool {
		return b.d.SchedSnapshot().Replicas == 2 && d2.SchedSnapshot().Replicas == 2
	})
	g := startGateWorker(t, b, "slow")
	ctx := timeout(t, 30*time.Second)
	var results []<-chan envelope.Result
	for i := range 6 {
		results = append(results, dispatchAsync(t, b.d, ctx, "A", fmt.Sprintf("one_%d", i), "slow"))
		results = append(results, dispatchAsync(t, d2, ctx, "A", fmt.Sprintf("two_%d", i), "slow"))
	}
	eventually(t, "each replica at its half of the cap", func() bool {
		s1, s2 := toolStats(b.d, "slow"), toolStats(d2, "slow")
		return s1.InFlight == 2 && s2.InFlight == 2 && s1.Limited == 4 && s2.Limited == 4 && len(g.arrived()) == 4
	})
	if l := toolStats(b.d, "slow").Limits; l.Concurrency != 2 {
		t.Errorf("first replica's limits %+v, want a cap of 2", l)
	}

	// Both answer a stats request.
	inbox := nats.NewInbox()
	sub, err := b.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := b.nc.PublishRequest(jetstream.SchedStatsSubject, inbox, nil); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("stats replies %v: %v", seen, err)
		}
		var snap sched.Snapshot
		if err := json.Unmarshal(m.Data, &snap); err != nil {
			t.Fatal(err)
		}
		seen[snap.Instance] = true
	}
	if !seen[b.d.Instance()] || !seen["orch-second"] {
		t.Errorf("stats from %v", seen)
	}

	g.open(12)
	for _, ch := range results {
		<-ch
	}
	g.mu.Lock()
	if g.maxRun["A"] > 4 {
		t.Errorf("%d of A's calls ran at once, the cap is 4", g.maxRun["A"])
	}
	g.mu.Unlock()

	// The second leaves: the first applies the whole cap again.
	stopNow(d2)
	eventually(t, "one replica", func() bool { return b.d.SchedSnapshot().Replicas == 1 })
}

func TestFairKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fairness, session, input, want string
	}{
		{"", "s1", `{}`, "acme"},
		{tools.FairnessTenant, "s1", `{}`, "acme"},
		{tools.FairnessSession, "s1", `{}`, "s1"},
		{tools.FairnessSession, "", `{}`, "acme"},
		{"input.repo", "", `{"a": {"repo": "no"}, "repo": "toolpool/toolpool"}`, "toolpool/toolpool"},
		{"input.n", "", `{"n": { "x" : 1 }}`, `{"x":1}`},
		{"input.repo", "", `{"other": 1}`, "acme"},
	} {
		tr := &turn{tenant: "acme", session: c.session, calls: []envelope.ToolUseBlock{{Input: json.RawMessage(c.input)}},
			slots: []slot{{info: ToolInfo{Fairness: c.fairness}}}}
		if got := tr.fairKey(0); got != c.want {
			t.Errorf("fairKey(%q, session %q, %s) = %q, want %q", c.fairness, c.session, c.input, got, c.want)
		}
	}
}

// A key flooding a tool is refused at MaxQueueDepth, counting the calls
// the scheduler holds; another key, below its fair share of the bound, is
// still admitted, and runs before the flood drains.
func TestFairShareAdmissionKeepsOtherKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin, func(c *Config) {
		c.Catalog = fairCatalog{"slow": {Slots: 1}}
		c.MaxQueueDepth = 10
	})
	g := startGateWorker(t, b, "slow")
	ctx := timeout(t, 30*time.Second)
	var mu sync.Mutex
	var wg sync.WaitGroup
	refused := 0
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.d.Dispatch(WithTenant(ctx, "A"), "", []envelope.ToolUseBlock{use(fmt.Sprintf("a_%02d", i), "slow", `{}`)})
			var se *SaturatedError
			if errors.As(err, &se) && se.Tool == "slow" {
				mu.Lock()
				refused++
				mu.Unlock()
			} else if err != nil {
				t.Errorf("turn %d: %v", i, err)
			}
		}()
		// Each turn is held (or running) or refused before the next.
		eventually(t, "the turn admitted or refused", func() bool {
			mu.Lock()
			defer mu.Unlock()
			ts := toolStats(b.d, "slow")
			return ts.Waiting+ts.InFlight+refused == i+1
		})
	}
	mu.Lock()
	if refused == 0 {
		t.Error("no call of the flooding key refused at MaxQueueDepth")
	}
	mu.Unlock()
	ts := toolStats(b.d, "slow")
	if ts.Waiting > 10 {
		t.Errorf("%d calls held, the bound is 10", ts.Waiting)
	}
	other := dispatchAsync(t, b.d, ctx, "B", "b_0", "slow")
	eventually(t, "B's call held, not refused", func() bool { return toolStats(b.d, "slow").Waiting == ts.Waiting+1 })
	g.open(100)
	if r := <-other; r.IsError {
		t.Errorf("B's result %+v", r)
	}
	wg.Wait()
	if pos := slices.Index(g.arrived(), "b_0"); pos < 0 || pos > 2 {
		t.Errorf("B's call ran %dth: %v", pos+1, g.arrived())
	}
}

// Calls over a key's rate wait for their tokens and are all served, each
// when its token comes (the scheduler's timer).
func TestFairShareRateServesLater(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.Catalog = fairCatalog{"echo": {Slots: 10, PerKey: tools.KeyLimits{Rate: 20, Burst: 1}}}
	})
	startWorker(t, b, "echo", echoText)
	ctx := timeout(t, 30*time.Second)
	var results []<-chan envelope.Result
	for i := range 6 {
		results = append(results, dispatchAsync(t, b.d, ctx, "A", fmt.Sprintf("r_%d", i), "echo"))
	}
	for _, ch := range results {
		if r := <-ch; r.IsError {
			t.Errorf("result %+v", r)
		}
	}
	ts := toolStats(b.d, "echo")
	if len(ts.Keys) != 1 || ts.Keys[0].Served != 6 || ts.Limits.Rate != 20 || ts.Limits.Burst != 1 {
		t.Errorf("snapshot %+v", ts)
	}
}

// Calls in flight far longer than the tool's calls take (waiting out a
// retry's backoff, here held by the worker) stop holding the window: the
// tool's other calls still run.
func TestFairShareStaleGrantsDoNotStallTheTool(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.WindowMargin = -1
		c.Catalog = fairCatalog{"slow": {Slots: 2}}
	})
	g := startGateWorker(t, b, "slow")
	ctx := timeout(t, 30*time.Second)
	stuck := []<-chan envelope.Result{
		dispatchAsync(t, b.d, ctx, "A", "stuck_1", "slow"),
		dispatchAsync(t, b.d, ctx, "A", "stuck_2", "slow"),
	}
	eventually(t, "the window full", func() bool { return len(g.arrived()) == 2 })
	var fast []<-chan envelope.Result
	for i := range 3 {
		fast = append(fast, dispatchAsync(t, b.d, ctx, "B", fmt.Sprintf("fast_%d", i), "slow"))
	}
	// The stuck calls go stale (a second after their grant: no call of the
	// tool has finished yet to say how long its calls take), and B's
	// calls reach the worker although the two still run.
	eventually(t, "B's calls at the worker", func() bool { return len(g.arrived()) == 5 })
	g.open(5)
	for _, ch := range append(fast, stuck...) {
		if r := <-ch; r.IsError {
			t.Errorf("result %+v", r)
		}
	}
}

// A turn whose own granted call runs past the deadline, and whose other
// call its key's cap holds: the held call is told of the cap, even though
// ending the running call's ticket frees the cap (and would grant it).
func TestFairShareHeldWordsInATurnWithARunningCall(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.Catalog = fairCatalog{"slow": {Slots: 10, PerKey: tools.KeyLimits{Concurrency: 1}}}
	})
	g := startGateWorker(t, b, "slow")
	res, err := b.d.Dispatch(WithTenant(timeout(t, time.Second), "A"), "", []envelope.ToolUseBlock{use("run_1", "slow", `{}`), use("held_2", "slow", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.arrived()) != 1 {
		t.Errorf("%d calls reached the worker, want 1 (the cap)", len(g.arrived()))
	}
	if r := res[0]; !r.IsError || r.Code == classify.CodeKeyConcurrency {
		t.Errorf("the running call: %+v (%s), want the no-result-in-time answer", r, r.Content.Text())
	}
	if r := res[1]; !r.IsError || r.Code != classify.CodeKeyConcurrency || !strings.Contains(r.Content.Text(), "at most 1 call to slow running at once") {
		t.Errorf("the held call: %+v (%s), want the cap's words", r, r.Content.Text())
	}
	g.open(1)
}

// Announcements from anyone who may publish on the presence subject are
// bounded: ids that are not tokens are ignored, and invented ids count
// for at most maxPeers replicas, so they cannot shrink a replica's share
// of a limit to nothing.
func TestPresenceIgnoresBadAndExcessAnnouncements(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.PresenceInterval = 200 * time.Millisecond }) // the fakes stay counted for 3 intervals
	for _, bad := range []string{`{"instance":"a b"}`, `{"instance":"a.b"}`, `{"instance":""}`, `not json`} {
		if err := b.nc.Publish(jetstream.SchedPresenceSubject, []byte(bad)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 * maxPeers {
		if err := b.nc.Publish(jetstream.SchedPresenceSubject, fmt.Appendf(nil, `{"instance":"fake-%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Without the bound the next interval's view would count 3*maxPeers+1.
	eventually(t, fmt.Sprintf("%d replicas (maxPeers and itself)", maxPeers+1), func() bool {
		n, _ := b.d.sched.Replicas()
		return n == maxPeers+1
	})
}
