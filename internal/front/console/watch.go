package console

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Bounds of what the watcher keeps.
const (
	tailSize      = 1000     // recent results, all tools
	samplesPerTol = 512      // execution times per tool, for p50/p99
	failuresPer   = 20       // recent failures per tool
	tenantsMax    = 100000   // calls whose tenant and trace are remembered until their result
	orphansMax    = tailSize // results whose call was not seen yet, remembered until it is
	rateWindow    = 10       // seconds the calls per second are averaged over
	classWindow   = 60       // seconds the results by class are counted over
)

// resultRow is one result in the tail.
type resultRow struct {
	N        uint64
	At       time.Time
	Tool     string
	Tenant   string
	Class    string // "ok" for a success
	Code     string
	Worker   string
	Exec     time.Duration
	Attempts int
	Text     string // what the model read, for errors (shortened)
	Key      string // the call's key: its page, /ui/calls/{key}
	CallID   string // the model's tool_use id
	Trace    string // the call's traceparent, when the watcher saw the call
}

// seenCall is what the watcher keeps of a call until its result.
type seenCall struct {
	tenant, trace string
}

// toolWatch is one tool's recent results.
type toolWatch struct {
	secs     [classWindow]secBucket
	samples  []time.Duration // ring
	next     int
	failures []resultRow // newest last
}

// secBucket counts one second's results by class.
type secBucket struct {
	sec     int64
	byClass map[string]int
}

// watcher follows the fleet's results on core NATS (tools.result.>, every
// orchestrator's) and the calls' tenants (tools.call.>) while someone uses
// the console, and stops idleAfter after the last request: nobody
// watching costs nothing.
type watcher struct {
	nc        *nats.Conn
	idleAfter time.Duration
	log       *slog.Logger
	lastTouch atomic.Int64 // unix nanos
	wake      chan struct{}

	mu      sync.Mutex
	since   time.Time // when watching began; zero while idle
	tools   map[string]*toolWatch
	tail    []resultRow         // ring of tailSize
	n       uint64              // results seen
	tenants map[string]seenCall // by call key
	orphans map[string]uint64   // results taken before their call: row number by call key
}

func newWatcher(nc *nats.Conn, idleAfter time.Duration, log *slog.Logger) *watcher {
	return &watcher{nc: nc, idleAfter: idleAfter, log: log, wake: make(chan struct{}, 1),
		tools: map[string]*toolWatch{}, tenants: map[string]seenCall{}, orphans: map[string]uint64{}}
}

// touch marks a request: watching starts, or goes on.
func (w *watcher) touch() {
	w.lastTouch.Store(time.Now().UnixNano())
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run subscribes while the console is used, until ctx ends.
func (w *watcher) run(ctx context.Context) {
	var subs []*nats.Subscription
	unsub := func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		subs = nil
		w.mu.Lock()
		w.since = time.Time{}
		w.tools, w.tenants, w.orphans, w.tail, w.n = map[string]*toolWatch{}, map[string]seenCall{}, map[string]uint64{}, nil, 0
		w.mu.Unlock()
	}
	defer unsub()
	tick := time.NewTicker(max(w.idleAfter/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-tick.C:
		}
		idle := time.Since(time.Unix(0, w.lastTouch.Load())) > w.idleAfter
		switch {
		case idle && subs != nil:
			unsub()
		case !idle && subs == nil:
			rs, err := w.nc.Subscribe(jetstream.ResultSubjectPrefix+">", w.onResult)
			if err != nil {
				w.log.Warn("console: watching results failed", "err", err)
				continue
			}
			cs, err := w.nc.Subscribe(jetstream.CallSubjectPrefix+">", w.onCall)
			if err != nil {
				_ = rs.Unsubscribe()
				w.log.Warn("console: watching calls failed", "err", err)
				continue
			}
			_ = rs.SetPendingLimits(65536, 64<<20)
			_ = cs.SetPendingLimits(65536, 64<<20)
			subs = []*nats.Subscription{rs, cs}
			w.mu.Lock()
			w.since = time.Now()
			w.mu.Unlock()
		}
	}
}

// onCall remembers the call's tenant and trace, for its result; or, when
// its result came first (calls and results are delivered on two
// subscriptions, each on its own goroutine), writes them into the result's
// row.
func (w *watcher) onCall(m *nats.Msg) {
	c, err := envelope.DecodeCall(m.Data, envelope.DefaultLimits)
	if err != nil {
		return
	}
	w.mu.Lock()
	if n, ok := w.orphans[c.Key]; ok {
		delete(w.orphans, c.Key)
		w.fillRow(n, c.Key, c.Tenant, c.Traceparent)
		w.mu.Unlock()
		return
	}
	if c.Tenant == "" && c.Traceparent == "" {
		w.mu.Unlock()
		return
	}
	if len(w.tenants) >= tenantsMax {
		clear(w.tenants)
	}
	w.tenants[c.Key] = seenCall{tenant: c.Tenant, trace: c.Traceparent}
	w.mu.Unlock()
}

func (w *watcher) onResult(m *nats.Msg) {
	res, err := envelope.DecodeResult(m.Data)
	if err != nil || res.Tool == "" {
		return
	}
	now := time.Now()
	row := resultRow{At: now, Tool: res.Tool, Class: string(res.Class), Code: res.Code, Worker: res.WorkerID,
		Exec: res.ExecTime, Attempts: res.Attempts, Key: res.Key, CallID: res.CallID}
	if row.Class == "" {
		row.Class = "ok"
	}
	if res.IsError {
		row.Text = shorten(res.Content.Text(), 400)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	row.N = w.n
	if sc, ok := w.tenants[res.Key]; ok {
		row.Tenant, row.Trace = sc.tenant, sc.trace
		delete(w.tenants, res.Key)
	} else if res.Key != "" {
		if len(w.orphans) >= orphansMax {
			clear(w.orphans) // their rows are leaving the tail anyway
		}
		w.orphans[res.Key] = row.N
	}
	if len(w.tail) < tailSize {
		w.tail = append(w.tail, row)
	} else {
		w.tail[(w.n-1)%tailSize] = row
	}
	tw := w.tools[res.Tool]
	if tw == nil {
		tw = &toolWatch{}
		w.tools[res.Tool] = tw
	}
	sec := now.Unix()
	b := &tw.secs[sec%classWindow]
	if b.sec != sec {
		b.sec, b.byClass = sec, map[string]int{}
	}
	b.byClass[row.Class]++
	if res.ExecTime > 0 {
		if len(tw.samples) < samplesPerTol {
			tw.samples = append(tw.samples, res.ExecTime)
		} else {
			tw.samples[tw.next] = res.ExecTime
			tw.next = (tw.next + 1) % samplesPerTol
		}
	}
	if res.IsError {
		tw.failures = append(tw.failures, row)
		if len(tw.failures) > failuresPer {
			tw.failures = tw.failures[1:]
		}
	}
}

// fillRow writes a call's tenant and trace into row n of the tail, and
// into its tool's recent failures, where the row is still kept. w.mu is
// held.
func (w *watcher) fillRow(n uint64, key, tenant, trace string) {
	if w.n-n >= tailSize {
		return
	}
	r := &w.tail[(n-1)%tailSize]
	if r.N != n || r.Key != key {
		return
	}
	r.Tenant, r.Trace = tenant, trace
	if tw := w.tools[r.Tool]; tw != nil {
		for i := range tw.failures {
			if tw.failures[i].N == n {
				tw.failures[i].Tenant, tw.failures[i].Trace = tenant, trace
			}
		}
	}
}

// toolRates is one tool's recent results, for the overview.
type toolRates struct {
	PerSecond float64
	ByClass   map[string]int // over classWindow seconds
	P50, P99  time.Duration
}

// rates returns every watched tool's recent results, and since when they
// are watched (zero: not yet).
func (w *watcher) rates(now time.Time) (map[string]toolRates, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]toolRates, len(w.tools))
	sec := now.Unix()
	for tool, tw := range w.tools {
		r := toolRates{ByClass: map[string]int{}}
		recent := 0
		for i := range tw.secs {
			b := tw.secs[i]
			if b.byClass == nil || sec-b.sec >= classWindow {
				continue
			}
			for class, n := range b.byClass {
				r.ByClass[class] += n
				if sec-b.sec < rateWindow && b.sec < sec { // whole seconds only
					recent += n
				}
			}
		}
		window := min(float64(rateWindow-1), now.Sub(w.since).Seconds())
		if window >= 1 {
			r.PerSecond = float64(recent) / window
		}
		if n := len(tw.samples); n > 0 {
			s := slices.Clone(tw.samples)
			slices.Sort(s)
			r.P50, r.P99 = s[n*50/100], s[min(n-1, n*99/100)]
		}
		out[tool] = r
	}
	return out, w.since
}

// failures returns the tool's recent failures, newest first.
func (w *watcher) failures(tool string) []resultRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	tw := w.tools[tool]
	if tw == nil {
		return nil
	}
	out := slices.Clone(tw.failures)
	slices.Reverse(out)
	return out
}

// tailAfter returns the results after n that keep passes, oldest first,
// at most limit (the newest of them), and the last result's number.
func (w *watcher) tailAfter(n uint64, limit int, keep func(*resultRow) bool) ([]resultRow, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []resultRow
	first := uint64(1)
	if w.n > tailSize {
		first = w.n - tailSize + 1
	}
	for i := max(first, n+1); i <= w.n; i++ {
		r := w.tail[(i-1)%tailSize]
		if keep(&r) {
			out = append(out, r)
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, w.n
}

// byKey returns the newest result of the call with key key the tail
// still holds, or, for a call seen and not answered yet, its trace.
func (w *watcher) byKey(key string) (row resultRow, answered bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.tail) - 1; i >= 0; i-- {
		if r := w.tail[i]; r.Key == key && (!answered || r.N > row.N) {
			row, answered = r, true
		}
	}
	if !answered {
		sc := w.tenants[key]
		row = resultRow{Key: key, Tenant: sc.tenant, Trace: sc.trace}
	}
	return row, answered
}

// shorten keeps s to about n bytes.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
