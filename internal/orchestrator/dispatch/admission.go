package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/jetstream"
)

// Defaults of the admission fields of Config.
const (
	// MaxCallsInFlightDefault caps the calls one dispatcher has published
	// and waits for, across all Dispatch calls: at the pool's throughput
	// measured in docs/performance.md (about 10,000 calls/s) two seconds
	// of work, far less than a call's timeout.
	MaxCallsInFlightDefault = 20_000
	// MaxQueueDepthDefault caps the calls waiting in one tool's consumer
	// (tool_<tool>: published, not yet delivered to a worker).
	MaxQueueDepthDefault = 10_000
	// QueueDepthRefreshDefault is how often a tool's queue depth is read
	// from JetStream while calls to it are dispatched.
	QueueDepthRefreshDefault = time.Second
	// SaturatedRetryAfterDefault is when a turn refused for saturation is
	// told to come back.
	SaturatedRetryAfterDefault = 2 * time.Second
	// SaturatedRetryAfterMax caps the Retry-After of a turn refused for
	// its estimated queue wait.
	SaturatedRetryAfterMax = 30 * time.Second
)

// admission bounds the calls a dispatcher accepts (Config.MaxCallsInFlight,
// Config.MaxQueueDepth, and the estimated queue wait unless
// Config.NoQueueWaitAdmission). A turn is admitted whole or not at all: its
// results go back in one message, and a refused turn has published
// nothing, so posting it again later runs each call once.
type admission struct {
	maxInFlight int64 // <= 0: unbounded
	maxDepth    int64 // <= 0: unbounded
	byWait      bool  // refuse a turn whose calls cannot start before its deadline
	refresh     time.Duration
	retryAfter  time.Duration
	js          js.JetStream
	log         *slog.Logger
	life        func() context.Context // the dispatcher's (startstop.Base.Life): bounds the reads
	// sched is the dispatcher's scheduler (nil with NoFairness): the calls
	// it holds count in their tool's queue, and a key below its fair share
	// of a bound is admitted even when the bound is reached.
	sched *sched.Scheduler

	inFlight atomic.Int64

	mu     sync.Mutex
	depths map[string]*queueDepth
}

func newAdmission(cfg Config, sc *sched.Scheduler, life func() context.Context) *admission {
	return &admission{
		sched:       sc,
		life:        life,
		maxInFlight: int64(cfg.MaxCallsInFlight),
		maxDepth:    int64(cfg.MaxQueueDepth),
		byWait:      !cfg.NoQueueWaitAdmission,
		refresh:     cfg.QueueDepthRefresh,
		retryAfter:  cfg.SaturatedRetryAfter,
		js:          cfg.JS,
		log:         cfg.Logger,
		depths:      map[string]*queueDepth{},
	}
}

// admitted is what admission control counts of a turn, from admit to
// unadmit.
type admitted struct {
	n     int64       // the calls counted in flight; 0 when none is
	tools []toolCalls // the calls per tool, in the order of their first call
	// depths says the calls are counted in their tools' queue-depth
	// estimates (reserve): under tools[i].gen.
	depths bool
	one    [1]toolCalls // tools' room for a turn of one tool
}

// toolCalls is a turn's calls to one tool, as admission control counts
// them.
type toolCalls struct {
	tool string
	n    int64
	gen  uint64     // the tool's queue-depth read generation at admission
	load sched.Load // the scheduler's load of the tool (reserve)
}

// gen returns the read generation tool's calls were admitted under; ok is
// false when they are not counted in the tool's estimate.
func (m *admitted) gen(tool string) (uint64, bool) {
	if !m.depths {
		return 0, false
	}
	for _, tc := range m.tools {
		if tc.tool == tool {
			return tc.gen, true
		}
	}
	return 0, false
}

// admit decides whether the calls t is about to publish may go; unadmit,
// when the turn ends, gives their room back. It never waits on the
// network: queue depths come from a cache refreshed in the background.
func (d *Dispatcher) admit(t *turn) error {
	a := d.adm
	var n int64
	tools := t.adm.one[:0]
	for i := range t.calls {
		if t.slots[i].state == slotWaiting {
			n++
			tools = countCall(tools, t.calls[i].Name)
		}
	}
	if n == 0 {
		return nil
	}
	if a.maxInFlight > 0 {
		load := a.inFlight.Add(n)
		// A turn alone larger than the bound still runs when nothing else
		// does, or it could never run; nor is a key refused that holds
		// less than its fair share of the bound.
		if load > a.maxInFlight && load != n && !a.belowShare(tools, t, a.maxInFlight) {
			a.inFlight.Add(-n)
			return &SaturatedError{Load: load - n, Limit: a.maxInFlight, RetryAfter: a.retryAfter}
		}
	} else {
		a.inFlight.Add(n)
	}
	if a.maxDepth > 0 || a.byWait {
		if err := a.reserve(tools, t); err != nil {
			a.inFlight.Add(-n)
			return err
		}
		t.adm.depths = true
	}
	t.adm.n, t.adm.tools = n, tools
	return nil
}

// countCall counts a call to tool in tools.
func countCall(tools []toolCalls, tool string) []toolCalls {
	for i := range tools {
		if tools[i].tool == tool {
			tools[i].n++
			return tools
		}
	}
	return append(tools, toolCalls{tool: tool, n: 1})
}

// unadmit gives back the room admit counted for t.
func (d *Dispatcher) unadmit(t *turn) {
	if t.adm.n == 0 {
		return
	}
	d.adm.inFlight.Add(-t.adm.n)
	if t.adm.depths {
		d.adm.release(t.adm.tools)
	}
	t.adm.n = 0
}

// release takes the calls of a turn that ended out of the tools' estimates,
// where they are still counted under the reads current when the turn was
// admitted. Calls admitted before a read started are the read's to count
// (it subtracts them when it ends).
func (a *admission) release(tools []toolCalls) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, tc := range tools {
		if q := a.depths[tc.tool]; q != nil && q.gen == tc.gen {
			q.since -= tc.n
		}
	}
}

// reserve refuses the turn when a tool's queue is full or holds more work
// than the turn has time left for (deadline), and otherwise counts its
// calls into the tools' estimates and records the tools' read generations
// in tools, for release.
//
// With fair shares, the calls the scheduler holds count in their tool's
// queue (they are not in JetStream's), and the key of the turn's calls
// to a tool is weighed by its own share: a key below its fair share of
// MaxQueueDepth (the bound over the keys with calls of the tool) is
// admitted even when the bound is reached, and the queue wait estimated
// for it is what the round robin makes it wait (its calls ahead, times
// the keys sharing the tool), not the whole queue.
func (a *admission) reserve(tools []toolCalls, t *turn) error {
	now := time.Now()
	left := t.deadline.Sub(now)
	// The scheduler's loads are read before a.mu is taken: its locks are
	// the tools', and every turn's admission and release take a.mu.
	if a.sched != nil {
		for i := range tools {
			tools[i].load = a.sched.Load(tools[i].tool, t.tenant, t.keyOf(tools[i].tool))
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, tc := range tools {
		tool, n := tc.tool, tc.n
		q := a.observe(tool, now)
		load := q.pending + q.since // in JetStream, or published since the read
		var fl sched.Load
		var granted int64 // the calls the scheduler grants before the turn's last
		if a.sched != nil {
			fl = tc.load
			load += int64(fl.Waiting)
			granted = min(int64(fl.Waiting), (int64(fl.KeyWaiting)+n)*int64(fl.Keys)-n)
		}
		if a.maxDepth > 0 && load >= a.maxDepth && (a.sched == nil || !fairShare(fl, n, a.maxDepth)) {
			return &SaturatedError{Tool: tool, Load: load, Limit: a.maxDepth, RetryAfter: a.retryAfter}
		}
		if !a.byWait {
			continue
		}
		if wait, ok := q.wait(now, staleSamples*a.refresh, n+granted); ok && wait > left {
			retry := min(max(wait-left, a.retryAfter), SaturatedRetryAfterMax)
			return &SaturatedError{Tool: tool, Load: load, Wait: wait, Left: max(left, 0), RetryAfter: retry}
		}
	}
	for i := range tools {
		q := a.depths[tools[i].tool]
		q.since += tools[i].n
		tools[i].gen = q.gen
	}
	return nil
}

// fairShare reports whether a key whose scheduler load is fl stays within
// its fair share of bound with n calls more: the bound divided among the
// keys with calls of the tool. A key alone has no share to defend: the
// bound is all its own.
func fairShare(fl sched.Load, n, bound int64) bool {
	if fl.Keys < 2 {
		return false
	}
	share := bound / int64(fl.Keys)
	return int64(fl.KeyWaiting+fl.KeyInFlight)+n <= share
}

// belowShare reports whether, for every tool of the turn, its key stays
// within its fair share of bound (false without fair shares).
func (a *admission) belowShare(tools []toolCalls, t *turn, bound int64) bool {
	if a.sched == nil {
		return false
	}
	for _, tc := range tools {
		if !fairShare(a.sched.Load(tc.tool, t.tenant, t.keyOf(tc.tool)), tc.n, bound) {
			return false
		}
	}
	return true
}

// hold takes a call admitted under read generation gen of tool out of
// the calls counted as published since the read (delta -1: the
// scheduler holds it and counts it itself), or puts it back (+1: granted
// or cancelled). A read started since counts it as it finds it.
func (a *admission) hold(tool string, gen uint64, delta int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q := a.depths[tool]; q != nil && q.gen == gen {
		q.since += delta
	}
}

// observe returns tool's estimate, starting a read of its consumer when
// the last one is older than the refresh period. a.mu is held.
func (a *admission) observe(tool string, now time.Time) *queueDepth {
	q := a.depths[tool]
	if q == nil {
		q = &queueDepth{}
		a.depths[tool] = q
	}
	if !q.refreshing && now.Sub(q.read) >= a.refresh {
		q.refreshing = true
		q.gen++
		go a.readDepth(tool, q.since)
	}
	return q
}

// readDepth reads the number of calls waiting in tool's consumer; counted
// is the estimate's count of calls published before the read, which the
// read includes (or which were delivered since).
func (a *admission) readDepth(tool string, counted int64) {
	ctx, cancel := context.WithTimeout(a.life(), max(a.refresh, time.Second)) // Stop ends it
	defer cancel()
	var pending int64
	var delivered uint64
	var working int64
	c, err := a.js.Consumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName(tool))
	if err == nil {
		info := c.CachedInfo()
		pending, working, delivered = int64(info.NumPending), int64(info.NumAckPending), info.Delivered.Consumer
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.depths[tool]
	q.refreshing = false
	q.read = time.Now()
	if err != nil {
		// Not readable (no consumer yet, NATS away): keep the estimate;
		// the publish itself will tell of an outage.
		a.log.Debug("reading a queue depth failed", slog.String("tool", tool), slog.Any("error", err))
		return
	}
	q.sample(pending, working, delivered, q.read, staleSamples*a.refresh)
	q.since -= counted
}
