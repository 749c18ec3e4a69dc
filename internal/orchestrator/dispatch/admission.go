package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
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

// The queue wait estimate (see queueDepth.sample).
const (
	// drainDecay is how much of a tool's past deliveries and busy time
	// each newly measured interval keeps: its drain rate is their ratio,
	// so it is weighted by time and forgets an interval within a few
	// reads. A ratio of sums, not an average of per-interval rates: a tool
	// whose calls all take 2 s delivers in bursts every 2 s, and a reading
	// once a second would swing between nothing and twice the rate.
	drainDecay = 0.8
	// staleSamples is how many refresh periods a read stays good for: an
	// interval between reads further apart is not measured (the queue may
	// have emptied in between), and an older read refuses nothing by
	// estimate.
	staleSamples = 5
)

// ErrSaturated is matched (errors.Is) by the error of a Dispatch that
// admission control refused: the dispatcher has Config.MaxCallsInFlight
// calls waiting, a tool's queue holds Config.MaxQueueDepth calls, or a
// tool's queue holds more work than the turn has time left for. The
// error is a *SaturatedError; it matches ErrUnavailable too, so callers
// that retry an unavailable pool retry a saturated one. Nothing of the
// turn was published. It is pooltype.ErrSaturated, which the HTTP
// client's errors match too.
var ErrSaturated = pooltype.ErrSaturated

// SaturatedError says why a turn was refused and when to try again.
type SaturatedError struct {
	// Tool is the tool whose queue is full; empty when the dispatcher's
	// bound on calls in flight was reached.
	Tool string
	// Load and Limit are the calls in flight (or in Tool's queue) and the
	// bound they reached; Limit is 0 when Wait is set.
	Load, Limit int64
	// Wait, when not zero, is why the turn was refused: the estimated
	// time until the turn's last call to Tool would be done (the calls
	// queued and in progress ahead of it, and the turn's own, divided by
	// the rate at which the tool's workers have drained its queue), more
	// than the turn's Left.
	Wait time.Duration
	// Left is the time the turn had left until its deadline, when Wait is
	// set.
	Left time.Duration
	// RetryAfter is when to try again.
	RetryAfter time.Duration
}

// Error says what is saturated and when to try again.
func (e *SaturatedError) Error() string {
	if e.Wait > 0 {
		return fmt.Sprintf("dispatch: %s: %d calls are queued for %s, about %s of work, more than the %s the turn has left",
			ErrSaturated, e.Load, e.Tool, e.Wait.Round(100*time.Millisecond), e.Left.Round(100*time.Millisecond))
	}
	if e.Tool != "" {
		return fmt.Sprintf("dispatch: %s: %d calls are queued for %s (the limit is %d)", ErrSaturated, e.Load, e.Tool, e.Limit)
	}
	return fmt.Sprintf("dispatch: %s: %d calls are in flight (the limit is %d)", ErrSaturated, e.Load, e.Limit)
}

// Is matches ErrSaturated and ErrUnavailable.
func (e *SaturatedError) Is(target error) bool {
	return target == ErrSaturated || target == ErrUnavailable
}

// SaturatedResult is the transient is_error a call of a refused turn is
// answered with: the model reads that the pool is saturated and when to
// try again.
func SaturatedResult(id, tool string, e *SaturatedError) envelope.Result {
	r := errorResult(id, tool, envelope.ClassTransient, classify.CodeTransient, classify.SaturatedMessage(classify.Saturation{
		Tool: tool, Busy: e.Tool, Wait: e.Wait, Left: e.Left, RetryAfter: e.RetryAfter,
	}))
	r.RetryAfter = e.RetryAfter
	return r
}

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
	stopped     <-chan struct{} // the dispatcher's: ends reads in progress
	// sched is the dispatcher's scheduler (nil with NoFairness): the calls
	// it holds count in their tool's queue, and a key below its fair share
	// of a bound is admitted even when the bound is reached.
	sched *sched.Scheduler

	inFlight atomic.Int64

	mu     sync.Mutex
	depths map[string]*queueDepth
}

// queueDepth is a tool's queue depth as last read, plus the calls this
// dispatcher published to it since that read started and has no results
// for yet (an estimate that errs on the full side: some of them may have
// been delivered already), and the rate at which the tool's workers drain
// its queue. Calls answered leave the estimate: at a high rate, a second's
// calls would otherwise count as queued although they ran.
type queueDepth struct {
	pending    int64
	since      int64
	gen        uint64    // counts the reads started: which calls since holds
	read       time.Time // the last read, failed or not
	refreshing bool

	sampled   time.Time // the last read that succeeded
	delivered uint64    // its consumer's delivery counter
	working   int64     // its calls delivered, not yet acknowledged
	drained   float64   // deliveries over the measured intervals, decayed
	busy      float64   // the seconds of those intervals, decayed
}

// rate is the tool's drain rate, deliveries per second while its queue
// was non-empty; 0 when unknown.
func (q *queueDepth) rate() float64 {
	if q.busy <= 0 {
		return 0
	}
	return q.drained / q.busy
}

// sample records a read of the tool's consumer at time at: pending calls
// waiting, working calls delivered and not acknowledged yet
// (NumAckPending), delivered its delivery counter (Delivered.Consumer, which
// counts redeliveries too: they take a worker's time as much as first
// deliveries, and JetStream serves them first). The drain rate is only
// measured over an interval in which the queue was non-empty at both
// reads: the workers were busy all along, so the deliveries measure what
// they can do; over any other interval they measure what arrived. An
// interval longer than maxGap is not measured either (the queue may have
// emptied in between), nor one over which the counter went back (the
// consumer was made again).
func (q *queueDepth) sample(pending, working int64, delivered uint64, at time.Time, maxGap time.Duration) {
	if dt := at.Sub(q.sampled).Seconds(); !q.sampled.IsZero() && dt > 0 && at.Sub(q.sampled) <= maxGap &&
		q.pending > 0 && pending > 0 && delivered >= q.delivered {
		q.drained = q.drained*drainDecay + float64(delivered-q.delivered)
		q.busy = q.busy*drainDecay + dt
	}
	q.pending, q.working, q.delivered, q.sampled = pending, working, delivered, at
}

// wait is the estimated time until the last of n calls published now
// would be done: the deliveries up to it (the calls queued, those
// published since the read, the n — which with fair shares include the
// calls the scheduler grants before the last of them) over the drain rate, plus its own run time, which
// while the workers are saturated is the calls they hold over the rate
// (Little's law: each of them is held for its run time). ok is false when
// there is no estimate: the rate is unknown (the tool was never seen
// saturated, or it never delivered while saturated), the queue was empty
// at the last read, or that read is older than maxAge.
func (q *queueDepth) wait(now time.Time, maxAge time.Duration, n int64) (d time.Duration, ok bool) {
	rate := q.rate()
	if rate <= 0 || q.pending <= 0 || q.sampled.IsZero() || now.Sub(q.sampled) > maxAge {
		return 0, false
	}
	secs := float64(q.pending+q.since+n+q.working) / rate
	if secs >= float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(secs * float64(time.Second)), true
}

func newAdmission(cfg Config, sc *sched.Scheduler, stopped <-chan struct{}) *admission {
	return &admission{
		sched:       sc,
		stopped:     stopped,
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

// admit decides whether the calls t is about to publish may go: done,
// called when the turn ends, gives their room back. It never waits on the
// network: queue depths come from a cache refreshed in the background.
func (d *Dispatcher) admit(t *turn) (done func(), err error) {
	a := d.adm
	var n int64
	perTool := map[string]int64{}
	for i := range t.calls {
		if t.slots[i].state == slotWaiting {
			n++
			perTool[t.calls[i].Name]++
		}
	}
	if n == 0 {
		return func() {}, nil
	}
	if a.maxInFlight > 0 {
		load := a.inFlight.Add(n)
		// A turn alone larger than the bound still runs when nothing else
		// does, or it could never run; nor is a key refused that holds
		// less than its fair share of the bound.
		if load > a.maxInFlight && load != n && !a.belowShare(perTool, t, a.maxInFlight) {
			a.inFlight.Add(-n)
			return nil, &SaturatedError{Load: load - n, Limit: a.maxInFlight, RetryAfter: a.retryAfter}
		}
	} else {
		a.inFlight.Add(n)
	}
	if a.maxDepth > 0 || a.byWait {
		gens, err := a.reserve(perTool, t)
		if err != nil {
			a.inFlight.Add(-n)
			return nil, err
		}
		t.admGens = gens
		return func() {
			a.inFlight.Add(-n)
			a.release(perTool, gens)
		}, nil
	}
	return func() { a.inFlight.Add(-n) }, nil
}

// release takes the calls of a turn that ended out of the tools' estimates,
// where they are still counted: gens are the reads current when the turn
// was admitted. Calls admitted before a read started are the read's to
// count (it subtracts them when it ends).
func (a *admission) release(perTool map[string]int64, gens map[string]uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for tool, k := range perTool {
		if q := a.depths[tool]; q != nil && q.gen == gens[tool] {
			q.since -= k
		}
	}
}

// reserve refuses the turn when a tool's queue is full or holds more work
// than the turn has time left for (deadline), and otherwise counts its
// calls into the tools' estimates and returns the tools' read generations,
// for release.
//
// With fair shares, the calls the scheduler holds count in their tool's
// queue (they are not in JetStream's), and the key of the turn's calls
// to a tool is weighed by its own share: a key below its fair share of
// MaxQueueDepth (the bound over the keys with calls of the tool) is
// admitted even when the bound is reached, and the queue wait estimated
// for it is what the round robin makes it wait (its calls ahead, times
// the keys sharing the tool), not the whole queue.
func (a *admission) reserve(perTool map[string]int64, t *turn) (map[string]uint64, error) {
	now := time.Now()
	left := t.deadline.Sub(now)
	// The scheduler's loads are read before a.mu is taken: its locks are
	// the tools', and every turn's admission and release take a.mu.
	var loadsBuf [4]toolLoad
	loads := loadsBuf[:0]
	if a.sched != nil {
		for tool := range perTool {
			loads = append(loads, toolLoad{tool, a.sched.Load(tool, t.tenant, t.keyOf(tool))})
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for tool, n := range perTool {
		q := a.observe(tool, now)
		load := q.pending + q.since // in JetStream, or published since the read
		var fl sched.Load
		var granted int64 // the calls the scheduler grants before the turn's last
		if a.sched != nil {
			for _, l := range loads {
				if l.tool == tool {
					fl = l.load
				}
			}
			load += int64(fl.Waiting)
			granted = min(int64(fl.Waiting), (int64(fl.KeyWaiting)+n)*int64(fl.Keys)-n)
		}
		if a.maxDepth > 0 && load >= a.maxDepth && (a.sched == nil || !fairShare(fl, n, a.maxDepth)) {
			return nil, &SaturatedError{Tool: tool, Load: load, Limit: a.maxDepth, RetryAfter: a.retryAfter}
		}
		if !a.byWait {
			continue
		}
		if wait, ok := q.wait(now, staleSamples*a.refresh, n+granted); ok && wait > left {
			retry := min(max(wait-left, a.retryAfter), SaturatedRetryAfterMax)
			return nil, &SaturatedError{Tool: tool, Load: load, Wait: wait, Left: max(left, 0), RetryAfter: retry}
		}
	}
	gens := make(map[string]uint64, len(perTool))
	for tool, k := range perTool {
		q := a.depths[tool]
		q.since += k
		gens[tool] = q.gen
	}
	return gens, nil
}

// toolLoad is what the scheduler holds of a tool, for reserve.
type toolLoad struct {
	tool string
	load sched.Load
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
func (a *admission) belowShare(perTool map[string]int64, t *turn, bound int64) bool {
	if a.sched == nil {
		return false
	}
	for tool, n := range perTool {
		if !fairShare(a.sched.Load(tool, t.tenant, t.keyOf(tool)), n, bound) {
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
	ctx, cancel := context.WithTimeout(context.Background(), max(a.refresh, time.Second))
	defer cancel()
	go func() {
		select {
		case <-a.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
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
