package sched

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when the test says.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock by d and runs the timers due, in this goroutine.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// chanNotifier sends each granted ticket on its channel.
type chanNotifier chan *Ticket

func (c chanNotifier) Granted(tk *Ticket) {
	select {
	case c <- tk:
	default:
		panic("notifier channel full")
	}
}

type bundle struct {
	s     *Scheduler
	clock *fakeClock
	ch    chanNotifier
}

func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	b := &bundle{clock: newFakeClock(), ch: make(chanNotifier, 100_000)}
	cfg.Clock = b.clock
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	b.s = s
	return b
}

func (b *bundle) req(tool, key string, idx int) Request {
	return Request{Tool: tool, Key: key, Tenant: key, Slots: 1, Index: idx, Notify: b.ch}
}

// granted returns the tickets granted since the last call, in order.
func (b *bundle) granted() []*Ticket {
	var out []*Ticket
	for {
		select {
		case tk := <-b.ch:
			out = append(out, tk)
		default:
			return out
		}
	}
}

// noMargin is a Config whose window is exactly the slots, and whose
// grants never go stale.
var noMargin = Config{Margin: -1, MinMargin: -1, StaleMin: -1}

func TestWindow(t *testing.T) {
	t.Parallel()
	s, _ := New(Config{})
	for _, c := range []struct{ slots, want int }{{0, 0}, {1, 5}, {16, 20}, {64, 80}, {100, 125}} {
		if got := s.Window(c.slots); got != c.want {
			t.Errorf("Window(%d) = %d, want %d", c.slots, got, c.want)
		}
	}
	s, _ = New(noMargin)
	if got := s.Window(8); got != 8 {
		t.Errorf("no margin: Window(8) = %d, want 8", got)
	}
}

func TestNoWindowGrantsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for i := range 1000 {
		r := b.req("t", "a", i)
		r.Slots = 0
		if _, ok := b.s.Acquire(r); !ok {
			t.Fatalf("call %d waits with no window", i)
		}
	}
}

// TestDRRWeights: with the window full, released slots go to the keys in
// turn, each key its weight in a row, FIFO within a key.
func TestDRRWeights(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin)
	first, ok := b.s.Acquire(b.req("t", "x", -1))
	if !ok {
		t.Fatal("first call waits")
	}
	weights := map[string]int{"a": 3, "b": 1, "c": 2}
	for i := range 12 {
		for _, k := range []string{"a", "b", "c"} {
			r := b.req("t", k, i)
			r.Weight = weights[k]
			if _, ok := b.s.Acquire(r); ok {
				t.Fatalf("%s %d granted with the window full", k, i)
			}
		}
	}
	order := b.releaseChain(t, first, 18)
	want := []string{"a0", "a1", "a2", "b0", "c0", "c1", "a3", "a4", "a5", "b1", "c2", "c3", "a6", "a7", "a8", "b2", "c4", "c5"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("grant order\n got %v\nwant %v", order, want)
	}
}

// TestNewKeyNotBehindBacklog: a key arriving behind another's backlog is
// served within one round, not after the backlog.
func TestNewKeyNotBehindBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin)
	var running []*Ticket
	for i := range 4 {
		r := b.req("t", "a", i)
		r.Slots = 4
		tk, ok := b.s.Acquire(r)
		if !ok {
			t.Fatal("a call waits with room in the window")
		}
		running = append(running, tk)
	}
	for i := range 1000 {
		r := b.req("t", "a", 4+i)
		r.Slots = 4
		b.s.Acquire(r)
	}
	r := b.req("t", "b", 0)
	r.Slots = 4
	if _, ok := b.s.Acquire(r); ok {
		t.Fatal("b granted with the window full")
	}
	b.s.Release(running[0])
	b.s.Release(running[1])
	g := b.granted()
	if len(g) != 2 || g[0].key.id.key != "a" || g[1].key.id.key != "b" {
		t.Fatalf("after two releases got %v, want a then b", keysOf(g))
	}
}

// releaseChain releases cur, then n-1 times the one ticket each release
// granted, and returns the n grants in order as key and index.
func (b *bundle) releaseChain(t *testing.T, cur *Ticket, n int) []string {
	t.Helper()
	var order []string
	for range n {
		b.s.Release(cur)
		g := b.granted()
		if len(g) != 1 {
			t.Fatalf("a release granted %d calls, want 1", len(g))
		}
		cur = g[0]
		order = append(order, keysOf(g)...)
	}
	return order
}

func keysOf(tks []*Ticket) []string {
	var out []string
	for _, tk := range tks {
		out = append(out, fmt.Sprintf("%s%d", tk.key.id.key, tk.Index()))
	}
	return out
}

// TestPriorityOvertakes: a high-priority call is granted before every
// waiting normal and low one, whatever the keys.
func TestPriorityOvertakes(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin)
	cur, _ := b.s.Acquire(b.req("t", "x", 0))
	for i := range 5 {
		r := b.req("t", "low", i)
		r.Priority = Low
		b.s.Acquire(r)
		b.s.Acquire(b.req("t", "normal", i))
	}
	r := b.req("t", "low", 99)
	r.Priority = High
	b.s.Acquire(r)
	order := b.releaseChain(t, cur, 11)
	want := "[low99 normal0 normal1 normal2 normal3 normal4 low0 low1 low2 low3 low4]"
	if fmt.Sprint(order) != want {
		t.Errorf("order %v, want %s", order, want)
	}
}

// TestCapHolds: a key at its cap waits even with room in the window, and
// other keys pass it; a release of the key's call lets its next go.
func TestCapHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin)
	mk := func(key string, i int) Request {
		r := b.req("t", key, i)
		r.Slots, r.Limits = 10, Limits{Concurrency: 2}
		return r
	}
	a0, ok0 := b.s.Acquire(mk("a", 0))
	_, ok1 := b.s.Acquire(mk("a", 1))
	a2, ok2 := b.s.Acquire(mk("a", 2))
	if !ok0 || !ok1 || ok2 {
		t.Fatalf("grants %v %v %v, want the third held by the cap", ok0, ok1, ok2)
	}
	if _, ok := b.s.Acquire(mk("b", 0)); !ok {
		t.Fatal("b held by a's cap")
	}
	snap := b.s.Snapshot("i")
	if ts := snap.Tools[0]; ts.Limited != 1 || ts.Waiting != 1 || ts.InFlight != 3 {
		t.Errorf("snapshot %+v", ts)
	}
	b.s.Release(a0)
	if g := b.granted(); len(g) != 1 || g[0] != a2 {
		t.Fatalf("after a release got %v, want a2", keysOf(g))
	}
}

func TestCancelRemoves(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin)
	cur, _ := b.s.Acquire(b.req("t", "a", 0))
	w1, _ := b.s.Acquire(b.req("t", "a", 1))
	w2, _ := b.s.Acquire(b.req("t", "b", 2))
	h, granted := b.s.Cancel(w1)
	if granted || h.Reason != HeldByFairShare {
		t.Fatalf("cancel: %+v granted=%v", h, granted)
	}
	if _, g := b.s.Cancel(w1); g {
		t.Fatal("a second cancel reports a grant")
	}
	b.s.Release(cur)
	if g := b.granted(); len(g) != 1 || g[0] != w2 {
		t.Fatalf("after the release got %v, want b2 (a1 was cancelled)", keysOf(g))
	}
	if _, g := b.s.Cancel(w2); !g {
		t.Fatal("cancel of a granted ticket does not say it was granted")
	}
	b.s.Release(w2)
	b.s.Release(w2) // twice: nothing
	ts := b.s.Snapshot("i").Tools[0]
	if ts.Waiting != 0 || ts.InFlight != 0 {
		t.Errorf("after everything ended: %+v", ts)
	}
}

// TestRateWithinBounds: a key offering far more than its rate is granted
// its rate (plus the burst) over a minute of the injected clock.
func TestRateWithinBounds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	lim := Limits{Rate: 50, Per: time.Second, Burst: 10}
	var grants atomic.Int64
	release := func(tk *Ticket) { grants.Add(1); b.s.Release(tk) }
	offered := 0
	for range 30 * 200 { // 200/s offered for 30 s: one call every 5 ms
		r := b.req("t", "a", offered)
		r.Slots, r.Limits = 1000, lim
		if tk, ok := b.s.Acquire(r); ok {
			release(tk)
		}
		offered++
		b.clock.Advance(5 * time.Millisecond)
		for _, tk := range b.granted() {
			release(tk)
		}
	}
	// Over 30 s: 50/s plus the first burst.
	got := grants.Load()
	lo, hi := int64(50*30-50), int64(50*30+10+1)
	if got < lo || got > hi {
		t.Errorf("%d calls granted in 30s at 50/s (offered %d), want %d..%d", got, offered, lo, hi)
	}
	// A call cancelled now says it waited on the rate.
	r := b.req("t", "a", -1)
	r.Slots, r.Limits = 1000, lim
	tk, ok := b.s.Acquire(r)
	if ok {
		t.Fatal("granted with thousands waiting")
	}
	h, _ := b.s.Cancel(tk)
	if h.Reason != HeldByRate || h.Limits.Rate != 50 || h.RetryAfter <= time.Second {
		t.Errorf("hold %+v: want the rate, and a retry after the queue ahead drained", h)
	}
}

// TestCapNeverExceeded: many goroutines acquire, wait for their grant
// and release; no key ever has more than its cap in flight, and the
// tool never more than its window.
func TestCapNeverExceeded(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Margin: -1, MinMargin: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const keys, perKey, cap, slots = 5, 400, 3, 8
	var inFlight [keys]atomic.Int32
	var total atomic.Int32
	var bad atomic.Int32
	var wg sync.WaitGroup
	for k := range keys {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ch := make(chanNotifier, 1)
				for i := range perKey / 4 {
					r := Request{Tool: "t", Key: fmt.Sprint(k), Slots: slots, Limits: Limits{Concurrency: cap}, Index: i, Notify: ch}
					tk, ok := s.Acquire(r)
					if !ok {
						<-ch
					}
					if n := inFlight[k].Add(1); n > cap {
						bad.Add(1)
					}
					if n := total.Add(1); n > slots {
						bad.Add(1)
					}
					total.Add(-1)
					inFlight[k].Add(-1)
					s.Release(tk)
				}
			}()
		}
	}
	wg.Wait()
	if bad.Load() > 0 {
		t.Errorf("a cap or the window was exceeded %d times", bad.Load())
	}
	ts := s.Snapshot("i").Tools[0]
	if ts.InFlight != 0 || ts.Waiting != 0 {
		t.Errorf("left over: %+v", ts)
	}
	var served uint64
	for _, k := range ts.Keys {
		served += k.Served
	}
	if served != keys*perKey {
		t.Errorf("served %d, want %d", served, keys*perKey)
	}
}

func TestShare(t *testing.T) {
	t.Parallel()
	l := Limits{Concurrency: 8, Rate: 50, Per: time.Second, Burst: 10}
	var caps, bursts int
	var rate float64
	for rank := range 3 {
		s := Share(l, 3, rank)
		caps += s.Concurrency
		bursts += s.Burst
		rate += s.Rate
	}
	if caps != 8 || bursts != 10 || rate < 49.99 || rate > 50.01 {
		t.Errorf("shares of 3 replicas sum to cap %d, burst %d, rate %v; want 8, 10, 50", caps, bursts, rate)
	}
	if s := Share(Limits{Concurrency: 2}, 3, 2); s.Concurrency != 1 {
		t.Errorf("a cap below the replicas: rank 2 gets %d, want 1 (never 0)", s.Concurrency)
	}
}

// TestReplicasSplitCap: a scheduler told of a second replica applies
// half the cap.
func TestReplicasSplitCap(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	mk := func(i int) Request {
		r := b.req("t", "a", i)
		r.Slots, r.Limits = 100, Limits{Concurrency: 8}
		return r
	}
	b.s.SetReplicas(2, 1)
	n := 0
	for i := range 20 {
		if _, ok := b.s.Acquire(mk(i)); ok {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d granted with 2 replicas and a cap of 8, want 4", n)
	}
	b.s.SetReplicas(1, 0)
	if g := b.granted(); len(g) != 4 {
		t.Errorf("alone again: %d more granted, want 4", len(g))
	}
	if ts := b.s.Snapshot("i"); ts.Replicas != 1 || ts.Tools[0].Limits.Concurrency != 8 {
		t.Errorf("snapshot %+v", ts)
	}
}

func TestSnapshotBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxKeys: 5})
	cur, _ := b.s.Acquire(b.req("t", "x", 0))
	_ = cur
	for i := range 50 {
		for range i%3 + 1 {
			b.s.Acquire(b.req("t", fmt.Sprintf("k%02d", i), i))
		}
	}
	snap := b.s.Snapshot("orch-1")
	ts := snap.Tools[0]
	if len(ts.Keys) != 5 || ts.Keys[4].Key != OtherKey {
		t.Fatalf("keys %d (last %q), want 5 with %q last", len(ts.Keys), ts.Keys[len(ts.Keys)-1].Key, OtherKey)
	}
	sum := 0
	for _, k := range ts.Keys {
		sum += k.Waiting + k.InFlight
	}
	if sum != ts.Waiting+ts.InFlight {
		t.Errorf("keys sum to %d, the tool has %d", sum, ts.Waiting+ts.InFlight)
	}
	busy := func(k KeyStats) int { return k.Waiting + k.InFlight }
	if !sort.SliceIsSorted(ts.Keys[:4], func(i, j int) bool { return busy(ts.Keys[i]) > busy(ts.Keys[j]) }) {
		t.Errorf("keys not busiest first: %+v", ts.Keys)
	}
	if _, err := json.Marshal(snap); err != nil {
		t.Fatal(err)
	}
}

func TestIdleKeysForgotten(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for i := range 100 {
		tk, _ := b.s.Acquire(b.req("t", fmt.Sprint(i), i))
		b.s.Release(tk)
	}
	b.clock.Advance(IdleKeyTTL + time.Second)
	if snap := b.s.Snapshot("i"); len(snap.Tools) != 0 {
		t.Errorf("an idle tool kept: %+v", snap.Tools)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	s, _ := New(Config{})
	defer s.Close()
	r := Request{Tool: "echo", Key: "tenant-a", Tenant: "tenant-a", Slots: 64}
	b.ReportAllocs()
	for b.Loop() {
		tk, _ := s.Acquire(r)
		s.Release(tk)
	}
}

// BenchmarkAcquireTicket is the dispatcher's way: the ticket in the
// caller's memory.
func BenchmarkAcquireTicket(b *testing.B) {
	s, _ := New(Config{})
	defer s.Close()
	r := Request{Tool: "echo", Key: "tenant-a", Tenant: "tenant-a", Slots: 64}
	var tk Ticket
	b.ReportAllocs()
	for b.Loop() {
		s.AcquireTicket(&tk, r)
		s.Release(&tk)
	}
}

func BenchmarkAcquireReleaseLimited(b *testing.B) {
	s, _ := New(Config{})
	defer s.Close()
	r := Request{Tool: "echo", Key: "tenant-a", Tenant: "tenant-a", Slots: 64,
		Limits: Limits{Concurrency: 8, Rate: 1e9, Per: time.Second}}
	b.ReportAllocs()
	for b.Loop() {
		tk, _ := s.Acquire(r)
		s.Release(tk)
	}
}

// BenchmarkContended: the window full, every release grants a waiting
// call of another key. Grants never go stale: on a slow machine the 64
// held ones would, the window would stop counting them, and an Acquire
// granted at once would leave the loop waiting for a grant for ever.
func BenchmarkContended(b *testing.B) {
	s, _ := New(Config{Margin: -1, MinMargin: -1, StaleMin: -1})
	defer s.Close()
	ch := make(chanNotifier, 1024)
	var held []*Ticket
	for i := range 64 {
		tk, _ := s.Acquire(Request{Tool: "echo", Key: fmt.Sprint(i % 8), Slots: 64, Notify: ch})
		held = append(held, tk)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		s.Acquire(Request{Tool: "echo", Key: fmt.Sprint(i % 8), Slots: 64, Notify: ch})
		s.Release(held[i%64])
		held[i%64] = <-ch
		i++
	}
}

func BenchmarkParallel(b *testing.B) {
	s, _ := New(Config{})
	defer s.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ch := make(chanNotifier, 1)
		r := Request{Tool: "echo", Key: "a", Slots: 64, Notify: ch}
		for pb.Next() {
			tk, ok := s.Acquire(r)
			if !ok {
				<-ch
			}
			s.Release(tk)
		}
	})
}

func TestByTenantAndMerge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxKeys: 3})
	b.s.Acquire(Request{Tool: "t", Tenant: "acme", Key: "s1", Slots: 1})
	for _, r := range []Request{
		{Tenant: "acme", Key: "s2"}, {Tenant: "acme", Key: "s2"}, {Tenant: "umbrella", Key: "x"}, {Tenant: "stray", Key: "y"}, {Tenant: "stray2", Key: "z"},
	} {
		r.Tool, r.Slots = "t", 1
		b.s.Acquire(r)
	}
	snap := b.s.Snapshot("one")
	rows := snap.Tools[0].ByTenant(func(tenant string) bool { return tenant == "acme" || tenant == "umbrella" })
	var got []string
	total := 0
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s:%d", r.Tenant, r.Waiting+r.InFlight))
		total += r.Waiting + r.InFlight
	}
	if total != 6 || got[len(got)-1][:len(OtherKey)] != OtherKey {
		t.Errorf("by tenant %v: want every call counted once, other last", got)
	}
	m := Merge([]Snapshot{snap, snap})
	if m.Replicas != 2 || len(m.Tools) != 1 || m.Tools[0].Waiting != 2*snap.Tools[0].Waiting || m.Tools[0].Window != 2*snap.Tools[0].Window {
		t.Errorf("merge %+v", m)
	}
	if k := m.Tools[0].Keys[0]; k.Waiting+k.InFlight != 2*(snap.Tools[0].Keys[0].Waiting+snap.Tools[0].Keys[0].InFlight) {
		t.Errorf("merged key %+v", k)
	}
}

// TestLoad: what admission control reads.
func TestLoad(t *testing.T) {
	t.Parallel()
	b := setup(t, noMargin)
	if l := b.s.Load("t", "a", "a"); l.Keys != 1 || l.Waiting != 0 {
		t.Errorf("unknown tool: %+v", l)
	}
	tk, _ := b.s.Acquire(b.req("t", "a", 0))
	w, _ := b.s.Acquire(b.req("t", "a", 1))
	if l := b.s.Load("t", "a", "a"); l != (Load{Waiting: 1, InFlight: 1, Window: 1, KeyWaiting: 1, KeyInFlight: 1, Keys: 1}) {
		t.Errorf("key a: %+v", l)
	}
	if l := b.s.Load("t", "b", "b"); l.Keys != 2 || l.KeyWaiting != 0 {
		t.Errorf("key b, new: %+v", l)
	}
	b.s.Cancel(w)
	b.s.Release(tk)
	if l := b.s.Load("t", "a", "a"); l.Keys != 1 || l.Waiting+l.InFlight != 0 {
		t.Errorf("after everything ended: %+v", l)
	}
}

// TestStaleGrantsLeaveTheWindow: calls granted long ago (waiting out a
// retry's backoff, most likely) stop holding the window, so the waiting
// calls go; they still count against their key's cap.
func TestStaleGrantsLeaveTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Margin: -1, MinMargin: -1})
	mk := func(key string, i int) Request {
		r := b.req("t", key, i)
		r.Slots, r.Limits = 2, Limits{Concurrency: 2}
		return r
	}
	// A run time of 10 ms: stale after 100 ms (StaleMinDefault).
	for range 8 { // a release in eight samples the run time
		tk, _ := b.s.Acquire(mk("x", 0))
		b.clock.Advance(10 * time.Millisecond)
		b.s.Release(tk)
	}
	a0, _ := b.s.Acquire(mk("a", 0))
	a1, _ := b.s.Acquire(mk("a", 1))
	a2, _ := b.s.Acquire(mk("a", 2))
	b0, _ := b.s.Acquire(mk("b", 0))
	if g := b.granted(); len(g) != 0 {
		t.Fatalf("granted %v with the window full", keysOf(g))
	}
	b.clock.Advance(50 * time.Millisecond)
	if g := b.granted(); len(g) != 0 {
		t.Fatalf("granted %v before the grants went stale", keysOf(g))
	}
	b.clock.Advance(60 * time.Millisecond)
	g := b.granted()
	if len(g) != 1 || g[0] != b0 {
		t.Fatalf("after the grants went stale got %v, want b0 (a2 is held by a's cap)", keysOf(g))
	}
	if ts := b.s.Snapshot("i").Tools[0]; ts.InFlight != 3 || ts.Limited != 1 {
		t.Errorf("snapshot %+v", ts)
	}
	b.s.Release(a0)
	if g := b.granted(); len(g) != 1 || g[0] != a2 {
		t.Fatalf("after a stale release got %v, want a2", keysOf(g))
	}
	for _, tk := range []*Ticket{a1, a2, b0} {
		b.s.Release(tk)
	}
	if ts := b.s.Snapshot("i").Tools[0]; ts.InFlight != 0 || ts.Waiting != 0 {
		t.Errorf("left over %+v", ts)
	}
	tt := b.s.tools["t"]
	if tt.stale != 0 || tt.grants.head != nil {
		t.Errorf("stale %d, grants listed %v", tt.stale, tt.grants.head != nil)
	}
}
