package dispatch

import (
	"math"
	"time"
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
