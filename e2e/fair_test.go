package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/worker/catalog"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Fleet controls (issue 15) through real worker processes: the tool is a
// webhook on a loopback httptest server, which sees every execution of
// every worker process and so counts, per key, what runs at once and in
// which order calls start. The orchestrator is in the test process, with
// the live catalog of the workers' announcements (their slots and the
// catalog's per-key limits). Nothing here asserts a duration: the
// properties are orders, counts and bounds.

// fairHold is how long the webhook holds each request: long enough that
// a backlog builds up behind the fleet's few slots.
const fairHold = 30 * time.Millisecond

// hookStart is one request the webhook received.
type hookStart struct {
	seq     int // 1-based, over all requests
	tenant  string
	n       int    // the call's number within its tenant and test
	callID  string // Toolpool-Call-Id
	attempt string // Toolpool-Attempt
	at      time.Time
}

// fairHook is the webhook: it holds each request for fairHold and counts.
type fairHook struct {
	srv *httptest.Server

	mu      sync.Mutex
	starts  []hookStart
	running map[string]int
	max     map[string]int
	waiters map[string]chan hookStart // call id → told when it starts
	gate    chan struct{}             // while not nil, requests wait for it to close
	held    int                       // requests waiting at the gate
}

func newFairHook(t *testing.T) *fairHook {
	t.Helper()
	h := &fairHook{running: map[string]int{}, max: map[string]int{}, waiters: map[string]chan hookStart{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fairHook) serve(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Tenant string `json:"tenant"`
		N      int    `json:"n"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, "bad input", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	s := hookStart{
		seq: len(h.starts) + 1, tenant: in.Tenant, n: in.N, at: time.Now(),
		callID: r.Header.Get(catalog.HeaderCallID), attempt: r.Header.Get(catalog.HeaderAttempt),
	}
	h.starts = append(h.starts, s)
	h.running[in.Tenant]++
	h.max[in.Tenant] = max(h.max[in.Tenant], h.running[in.Tenant])
	if ch, ok := h.waiters[s.callID]; ok {
		ch <- s
		delete(h.waiters, s.callID)
	}
	gate := h.gate
	if gate != nil {
		h.held++
	}
	h.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		h.mu.Lock()
		h.held--
		h.mu.Unlock()
	}

	select {
	case <-time.After(fairHold):
	case <-r.Context().Done():
	}
	// Counted as done before the answer leaves: the worker cannot report
	// the call before the hook has stopped counting it as running.
	h.mu.Lock()
	h.running[in.Tenant]--
	h.mu.Unlock()
	fmt.Fprintf(w, "done %s %d", in.Tenant, in.N)
}

// pause makes the requests from now on wait until resume.
func (h *fairHook) pause() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate == nil {
		h.gate = make(chan struct{})
	}
}

// resume lets the waiting requests go on, and the next ones through.
func (h *fairHook) resume() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

// heldNow is the number of requests waiting at the gate.
func (h *fairHook) heldNow() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// count is the number of requests so far.
func (h *fairHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.starts)
}

// startsOf counts the requests of tenant so far.
func (h *fairHook) startsOf(tenant string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.starts {
		if s.tenant == tenant {
			n++
		}
	}
	return n
}

// all is every request so far, in order.
func (h *fairHook) all() []hookStart {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.starts)
}

// maxRunning is the most requests of tenant the hook held at once.
func (h *fairHook) maxRunning(tenant string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.max[tenant]
}

// expect returns a channel told when the call with this id starts.
func (h *fairHook) expect(callID string) <-chan hookStart {
	ch := make(chan hookStart, 1)
	h.mu.Lock()
	h.waiters[callID] = ch
	h.mu.Unlock()
	return ch
}

// fairTool is a catalog entry for the hook: a webhook tool named name,
// fleet-wide concurrency concurrency, idempotent (a call of a killed
// worker runs again elsewhere), with the YAML of its per-key limits.
func (h *fairHook) fairTool(name string, concurrency int, perKey string) string {
	entry := fmt.Sprintf(`  - name: %s
    description: Holds each call briefly and counts what runs at once, per tenant.
    input_schema:
      type: object
      properties:
        tenant: {type: string}
        n: {type: integer}
      required: [tenant, n]
    timeout: 30s
    idempotent: true
    concurrency: %d
    backend: webhook
    webhook:
      url: %s
`, name, concurrency, h.srv.URL)
	if perKey != "" {
		entry += "    per_key:\n" + perKey
	}
	return entry
}

// fairPool is an orchestrator in the test process whose catalog is the
// live one, and worker processes serving one catalog file.
type fairPool struct {
	t     *testing.T
	url   string
	js    js.JetStream
	d     *dispatch.Dispatcher
	o     *pooltest.Orchestrator
	tools string // the catalog file
	tool  string
	seq   atomic.Int64
}

// newFairPool starts the server and the orchestrator and writes the
// catalog of tool (entry is its YAML, as fairTool writes it); mods may
// change the dispatcher's config.
func newFairPool(t *testing.T, tool, entry string, mods ...func(*dispatch.Config)) *fairPool {
	t.Helper()
	srv, nc, j := natstest.StartProvisioned(t)
	file := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte("version: 1\ntools:\n"+entry), 0o600); err != nil {
		t.Fatal(err)
	}
	o := pooltest.StartOrchestrator(t, nc, nil, func(c *pooltest.OrchestratorConfig) { // nil: the live catalog
		for _, m := range mods {
			m(&c.Dispatch)
		}
	})
	return &fairPool{t: t, url: srv.ClientURL(), js: j, d: o.Dispatcher(), o: o, tools: file, tool: tool}
}

// startWorker starts a worker process of concurrency slots serving the
// catalog, with more flags if given, and waits until it has announced the
// tool.
func (p *fairPool) startWorker(id string, concurrency int, flags ...string) *proctest.Proc {
	p.t.Helper()
	proc := proctest.Start(p.t, workerBin, append([]string{"--nats-url", p.url, "--tools", p.tools,
		"--concurrency", fmt.Sprint(concurrency), "--id", id, "--drain-timeout", "2s"}, flags...)...)
	proc.Eventually(waitLong, p.tool+" announced by "+id, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		kv, err := p.js.KeyValue(ctx, discovery.BucketDefault)
		if err != nil {
			return false
		}
		_, err = kv.Get(ctx, discovery.Key(p.tool, id))
		return err == nil
	})
	return proc
}

// block is tenant's call number n.
func (p *fairPool) block(tenant string, n int) envelope.ToolUseBlock {
	return envelope.ToolUseBlock{
		Type: "tool_use", ID: fmt.Sprintf("toolu_fair_%s_%s_%d", p.t.Name(), tenant, p.seq.Add(1)), Name: p.tool,
		Input: json.RawMessage(fmt.Sprintf(`{"tenant":%q,"n":%d}`, tenant, n)),
	}
}

// call dispatches b under ctx (its tenant, its priority) and returns the
// result; a failed Dispatch or a result for another call fails the test.
func (p *fairPool) call(ctx context.Context, b envelope.ToolUseBlock) envelope.Result {
	ctx, cancel := context.WithTimeout(ctx, 2*waitLong)
	defer cancel()
	res, err := p.d.Dispatch(ctx, "", []envelope.ToolUseBlock{b})
	if err != nil {
		p.t.Errorf("Dispatch %s: %v", b.ID, err)
		return envelope.Result{IsError: true}
	}
	if len(res) != 1 || res[0].CallID != b.ID {
		p.t.Errorf("Dispatch %s: results %+v", b.ID, res)
		return envelope.Result{IsError: true}
	}
	return res[0]
}

// backlog dispatches n calls of tenant at once under ctx (with tenant
// put in it), each a turn of its own; answered counts them as their results come, and the returned
// function waits for them all and fails the test for any is_error.
func (p *fairPool) backlog(ctx context.Context, tenant string, n int, answered *atomic.Int64) (wait func()) {
	var wg sync.WaitGroup
	var failed atomic.Int64
	ctx = dispatch.WithTenant(ctx, tenant)
	for i := range n {
		b := p.block(tenant, i)
		wg.Go(func() {
			if res := p.call(ctx, b); res.IsError {
				failed.Add(1)
			}
			answered.Add(1)
		})
	}
	return func() {
		p.t.Helper()
		wg.Wait()
		if f := failed.Load(); f > 0 {
			p.t.Errorf("%d of tenant %s's %d calls failed", f, tenant, n)
		}
	}
}

// toolStats is the tool in the dispatcher's scheduler snapshot.
func (p *fairPool) toolStats() sched.ToolStats {
	for _, ts := range p.d.SchedSnapshot().Tools {
		if ts.Tool == p.tool {
			return ts
		}
	}
	return sched.ToolStats{}
}

// frozenCall dispatches b under ctx with the fleet frozen, so that which
// calls run before it depends on order alone: the hook holds every request
// until all slots hold one, when the calls in flight are exactly the
// tool's window (the slots, and window − slots queued in JetStream) and
// the rest of the backlog waits in the scheduler; once the scheduler holds
// b too (waits says so of its snapshot), everything goes on. It returns
// the calls started before b was dispatched (b's start is after them),
// b's start, the tool's scheduler stats at the freeze, and b's result.
func (p *fairPool) frozenCall(ctx context.Context, hook *fairHook, b envelope.ToolUseBlock, slots int, waits func(sched.ToolStats) bool) (before int, start hookStart, ts sched.ToolStats, res envelope.Result) {
	p.t.Helper()
	hook.pause()
	defer hook.resume()
	eventually(p.t, "every slot to hold a call", func() bool { return hook.heldNow() == slots })
	eventually(p.t, "the scheduler to hold the backlog", func() bool {
		ts = p.toolStats()
		return ts.Waiting > 0 && ts.InFlight == ts.Window
	})
	before = hook.count()
	started := hook.expect(b.ID)
	done := make(chan envelope.Result, 1)
	go func() { done <- p.call(ctx, b) }()
	eventually(p.t, "the scheduler to hold "+b.ID, func() bool { return waits(p.toolStats()) })
	hook.resume()
	return before, <-started, ts, <-done
}

// warmUp makes one call per worker's slot so every worker process has
// taken calls of the tool (and the catalog has seen them all).
func (p *fairPool) warmUp(slots int) {
	p.t.Helper()
	var answered atomic.Int64
	p.backlog(context.Background(), "warm", slots, &answered)()
}

// startFairFleet starts a pool of workers worker processes of perWorker
// slots each serving the hook's tool, whose fleet-wide concurrency is
// their slots, and makes a call for each slot. Its calls never go stale
// (dispatch.Config.StaleAfter): frozenCall holds running calls at the hook
// for as long as the machine takes, and a call held past a few run times
// would stop counting against the window, which would then grow.
func startFairFleet(t *testing.T, tool string, workers, perWorker int) (*fairHook, *fairPool) {
	t.Helper()
	hook := newFairHook(t)
	p := newFairPool(t, tool, hook.fairTool(tool, workers*perWorker, ""), func(c *dispatch.Config) { c.StaleAfter = -1 })
	for i := range workers {
		p.startWorker(fmt.Sprintf("%s-worker-%d", tool, i), perWorker)
	}
	p.warmUp(workers * perWorker)
	return hook, p
}

// The noisy-neighbour property: with tenant A's backlog queued behind the
// fleet's slots, each of tenant B's calls starts after at most about one
// window of A's calls (the ones already handed to JetStream when B came),
// not after A's whole backlog; and B is answered while most of A's backlog
// still waits.
func TestFairNoisyNeighbourOrder(t *testing.T) {
	t.Parallel()
	const workers, perWorker, slots = 2, 4, 8
	const backlog, bCalls = 300, 5
	hook, p := startFairFleet(t, "fair_noisy", workers, perWorker)

	var aAnswered atomic.Int64
	waitA := p.backlog(context.Background(), "A", backlog, &aAnswered)

	bctx := dispatch.WithTenant(context.Background(), "B")
	bWaits := func(ts sched.ToolStats) bool {
		for _, k := range ts.Keys {
			if k.Tenant == "B" && k.Waiting > 0 {
				return true
			}
		}
		return false
	}
	for i := range bCalls {
		before, s, ts, res := p.frozenCall(bctx, hook, p.block("B", i), slots, bWaits)
		if res.IsError {
			t.Fatalf("B's call %d: %+v", i, res)
		}
		aAfter := 0
		for _, x := range hook.all()[before : s.seq-1] {
			if x.tenant == "A" {
				aAfter++
			}
		}
		t.Logf("B's call %d started after %d more of A's calls (window %d, slots %d); %d of A's %d answered when B's was",
			i, aAfter, ts.Window, ts.Slots, aAnswered.Load(), backlog)
		// Before B's call run those of A's already in JetStream when it
		// came (window − slots) and those granted as the same results came
		// in while its publish was on its way: at most a window, never
		// the backlog.
		if ts.Slots != slots || ts.Window < slots {
			t.Errorf("the scheduler's window %d over %d slots; want %d slots", ts.Window, ts.Slots, slots)
		}
		if aAfter > ts.Window {
			t.Errorf("B's call %d started after %d more of A's calls; bound: the window, %d", i, aAfter, ts.Window)
		}
		if a := aAnswered.Load(); a >= backlog {
			t.Errorf("B's call %d was answered after A's whole backlog (%d of %d answered)", i, a, backlog)
		}
	}
	waitA()
	// Every call of B started before the last of A's.
	all := hook.all()
	lastA, lastB := 0, 0
	for _, s := range all {
		switch s.tenant {
		case "A":
			lastA = s.seq
		case "B":
			lastB = s.seq
		}
	}
	if lastB == 0 || lastB > lastA {
		t.Errorf("B's last call started at position %d, A's last at %d: B was served after A's backlog", lastB, lastA)
	}
}

// A per-key concurrency cap holds fleet-wide: two worker processes with
// slots to spare, two tenants with a backlog each, and the webhook never
// holds more than the cap of one tenant's calls at once.
func TestFairPerKeyCapAcrossWorkers(t *testing.T) {
	t.Parallel()
	const workers, perWorker, cap, calls = 2, 8, 3, 40
	hook := newFairHook(t)
	p := newFairPool(t, "fair_capped", hook.fairTool("fair_capped", workers*perWorker, fmt.Sprintf("      concurrency: %d\n", cap)))
	for i := range workers {
		p.startWorker(fmt.Sprintf("cap-worker-%d", i), perWorker)
	}
	p.warmUp(cap)

	var answered atomic.Int64
	waitA := p.backlog(context.Background(), "A", calls, &answered)
	waitB := p.backlog(context.Background(), "B", calls, &answered)
	waitA()
	waitB()

	for _, tenant := range []string{"A", "B"} {
		n, m := hook.startsOf(tenant), hook.maxRunning(tenant)
		t.Logf("tenant %s: %d calls, at most %d at once (cap %d)", tenant, n, m, cap)
		if n != calls {
			t.Errorf("tenant %s: the webhook saw %d calls, want %d", tenant, n, calls)
		}
		if m > cap {
			t.Errorf("tenant %s: %d calls ran at once across the workers; the cap is %d", tenant, m, cap)
		}
		if m < 2 {
			t.Errorf("tenant %s: at most %d call ran at once: the backlog never used the cap of %d", tenant, m, cap)
		}
	}
}

// A per-key rate limit holds over a worker's death: one key's backlog is
// started at the limit's pace while one of the two worker processes is
// killed (SIGKILL: its calls come back after the liveness window, here
// --ack-wait 4s for every worker, the default being 20 s) and a new one
// starts; in any window of the limit's period the key's calls started
// (each counted at its first start) stay within the rate and the burst,
// and every call is answered once.
func TestFairRateLimitOverWorkerRestart(t *testing.T) {
	t.Parallel()
	const rate, burst, calls = 6, 2, 36
	const per = 2 * time.Second
	hook := newFairHook(t)
	limits := fmt.Sprintf("      rate: %d\n      per: %s\n      burst: %d\n", rate, per, burst)
	p := newFairPool(t, "fair_rated", hook.fairTool("fair_rated", 16, limits))
	ackWait := []string{"--ack-wait", "4s"} // every worker: each brings the consumer to its own
	victim := p.startWorker("rate-worker-0", 8, ackWait...)
	p.startWorker("rate-worker-1", 8, ackWait...)
	// No warm-up: its calls would be the same key's, and the limit
	// counts them as any other.

	var answered atomic.Int64
	waitA := p.backlog(context.Background(), "A", calls, &answered)
	eventually(t, "a third of the calls to start", func() bool { return hook.startsOf("A") >= calls/3 })
	victim.Kill()
	p.startWorker("rate-worker-2", 8, ackWait...)
	waitA()

	// The first start of each call (a call of the killed worker runs again
	// elsewhere: the same call, not a new one against the limit).
	first := map[string]time.Time{}
	for _, s := range hook.all() {
		if _, ok := first[s.callID]; !ok {
			first[s.callID] = s.at
		}
	}
	if len(first) != calls {
		t.Fatalf("the webhook saw %d distinct calls, want %d", len(first), calls)
	}
	var at []time.Time
	for _, ts := range first {
		at = append(at, ts)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	worst := 0
	for i := range at {
		j := i
		for j < len(at) && at[j].Sub(at[i]) < per {
			j++
		}
		worst = max(worst, j-i)
	}
	t.Logf("at most %d calls started within one period of %v (limit %d + burst %d)", worst, per, rate, burst)
	if worst > rate+burst {
		t.Errorf("%d calls started within one period of %v; the limit allows %d per period with a burst of %d (at most %d)", worst, per, rate, burst, rate+burst)
	}
	if worst < 2 {
		t.Errorf("at most %d call started within a period: the test did not load the limit", worst)
	}
}

// Priorities overtake: with a low-priority backlog of one tenant waiting,
// a high-priority call of the same tenant starts before every
// low-priority call that was still waiting (at most the window of calls
// already handed to JetStream runs before it).
func TestFairPriorityOvertakes(t *testing.T) {
	t.Parallel()
	const workers, perWorker, slots = 2, 2, 4
	const lows, highs = 120, 3
	hook, p := startFairFleet(t, "fair_prio", workers, perWorker)

	var lowAnswered atomic.Int64
	waitLow := p.backlog(dispatch.WithPriority(context.Background(), dispatch.PriorityLow), "A", lows, &lowAnswered)

	hctx := dispatch.WithPriority(dispatch.WithTenant(context.Background(), "A"), dispatch.PriorityHigh)
	highWaits := func(ts sched.ToolStats) bool {
		for _, k := range ts.Keys {
			if k.ByPriority["high"] > 0 {
				return true
			}
		}
		return false
	}
	for i := range highs {
		// Same tenant, same key: only the priority differs.
		before, s, ts, res := p.frozenCall(hctx, hook, p.block("A", lows+i), slots, highWaits)
		if res.IsError {
			t.Fatalf("high-priority call %d: %+v", i, res)
		}
		overtook := s.seq - 1 - before // low calls started between its dispatch and its start
		t.Logf("high-priority call %d started after %d more low-priority calls (window %d, slots %d); %d of %d low answered",
			i, overtook, ts.Window, ts.Slots, lowAnswered.Load(), lows)
		if overtook > ts.Window {
			t.Errorf("high-priority call %d started after %d more low-priority calls; bound: the window, %d", i, overtook, ts.Window)
		}
		if l := lowAnswered.Load(); l >= lows {
			t.Errorf("high-priority call %d was answered after the whole low-priority backlog", i)
		}
	}
	waitLow()
}
