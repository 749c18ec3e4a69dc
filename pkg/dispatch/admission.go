package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

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
)

// ErrSaturated is matched (errors.Is) by the error of a Dispatch that
// admission control refused: the dispatcher has Config.MaxCallsInFlight
// calls waiting, or a tool's queue holds Config.MaxQueueDepth calls. The
// error is a *SaturatedError; it matches ErrUnavailable too, so callers
// that retry an unavailable pool retry a saturated one. Nothing of the
// turn was published.
var ErrSaturated = errors.New("tool pool saturated")

// SaturatedError says why a turn was refused and when to try again.
type SaturatedError struct {
	// Tool is the tool whose queue is full; empty when the dispatcher's
	// bound on calls in flight was reached.
	Tool string
	// Load and Limit are the calls in flight (or in Tool's queue) and the
	// bound they reached.
	Load, Limit int64
	// RetryAfter is when to try again.
	RetryAfter time.Duration
}

func (e *SaturatedError) Error() string {
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
	secs := int(math.Ceil(e.RetryAfter.Seconds()))
	why := "the tool pool has too many calls in flight"
	if e.Tool != "" {
		why = "too many calls are waiting for " + e.Tool
	}
	r := errorResult(id, tool, envelope.ClassTransient, classify.CodeTransient, fmt.Sprintf(
		"The call to %s was not run: the tool pool is saturated (%s). Try the call again in %d seconds, or answer from what you know.",
		tool, why, secs))
	r.RetryAfter = e.RetryAfter
	return r
}

// admission bounds the calls a dispatcher accepts (Config.MaxCallsInFlight,
// Config.MaxQueueDepth). A turn is admitted whole or not at all: its
// results go back in one message, and a refused turn has published
// nothing, so posting it again later runs each call once.
type admission struct {
	maxInFlight int64 // <= 0: unbounded
	maxDepth    int64 // <= 0: unbounded
	refresh     time.Duration
	retryAfter  time.Duration
	js          js.JetStream
	log         *slog.Logger
	stopped     <-chan struct{} // the dispatcher's: ends reads in progress

	inFlight atomic.Int64

	mu     sync.Mutex
	depths map[string]*queueDepth
}

// queueDepth is a tool's queue depth as last read, plus the calls this
// dispatcher published to it since that read started and has no results
// for yet (an estimate that errs on the full side: some of them may have
// been delivered already). Calls answered leave the estimate: at a high
// rate, a second's calls would otherwise count as queued although they ran.
type queueDepth struct {
	pending    int64
	since      int64
	gen        uint64 // counts the reads started: which calls since holds
	read       time.Time
	refreshing bool
}

func newAdmission(cfg Config, stopped <-chan struct{}) *admission {
	return &admission{
		stopped:     stopped,
		maxInFlight: int64(cfg.MaxCallsInFlight),
		maxDepth:    int64(cfg.MaxQueueDepth),
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
		if t.slots[i] == slotWaiting {
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
		// does, or it could never run.
		if load > a.maxInFlight && load != n {
			a.inFlight.Add(-n)
			return nil, &SaturatedError{Load: load - n, Limit: a.maxInFlight, RetryAfter: a.retryAfter}
		}
	} else {
		a.inFlight.Add(n)
	}
	if a.maxDepth > 0 {
		gens, err := a.reserve(perTool)
		if err != nil {
			a.inFlight.Add(-n)
			return nil, err
		}
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

// reserve refuses the turn when a tool's queue is full, and otherwise
// counts its calls into the tools' estimates and returns the tools' read
// generations, for release.
func (a *admission) reserve(perTool map[string]int64) (map[string]uint64, error) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for tool := range perTool {
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
		if load := q.pending + q.since; load >= a.maxDepth {
			return nil, &SaturatedError{Tool: tool, Load: load, Limit: a.maxDepth, RetryAfter: a.retryAfter}
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
	c, err := a.js.Consumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName(tool))
	if err == nil {
		pending = int64(c.CachedInfo().NumPending)
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
	q.pending = pending
	q.since -= counted
}
