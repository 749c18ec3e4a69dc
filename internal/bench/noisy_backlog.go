package bench

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
)

// backlogs runs A's backlog with B's trickle and alone, twice, in the
// order with, alone, alone, with: the first phase of a run is the slowest
// (caches, the store's files) and the machine's speed drifts (other
// processes), and the order weighs both on the two modes alike. Each
// mode's figures are over its two runs.
func (n *noisyRun) backlogs(ctx context.Context) (alone, withB BacklogPhase, b TricklePhase, err error) {
	var trickles []TricklePhase
	for _, with := range []bool{true, false, false, true} {
		a, t, err := n.backlog(ctx, with)
		if err != nil {
			return alone, withB, b, err
		}
		sum := &alone
		if with {
			sum = &withB
			trickles = append(trickles, t)
		}
		sum.Calls += a.Calls
		sum.Errors += a.Errors
		sum.Seconds += a.Seconds
		sum.CallsPerSec = float64(sum.Calls) / sum.Seconds
	}
	return alone, withB, mergeTrickles(trickles), nil
}

// mergeTrickles sums B's calls of several phases: their latencies, the
// slowest of them, and those sent after each phase's intake.
func mergeTrickles(ts []TricklePhase) TricklePhase {
	var out TricklePhase
	var lats, after []time.Duration
	for _, t := range ts {
		out.Calls += t.Calls
		out.Errors += t.Errors
		out.Intakes = append(out.Intakes, t.IntakeMillis)
		for _, c := range t.all {
			d := time.Duration(c.LatencyMillis * float64(time.Millisecond))
			lats = append(lats, d)
			if t.IntakeMillis > 0 && c.SentMillis >= t.IntakeMillis {
				after = append(after, d)
			}
		}
		out.all = append(out.all, t.all...)
	}
	out.Latency, out.AfterIntake, out.AfterIntakeCalls = latencyOf(lats), latencyOf(after), len(after)
	slices.SortFunc(out.all, func(a, b TrickleCall) int { return cmp.Compare(b.LatencyMillis, a.LatencyMillis) })
	out.Slowest = out.all[:min(len(out.all), slowestShown)]
	return out
}

// backlog is A's backlog, alone or with B's trickle.
func (n *noisyRun) backlog(ctx context.Context, withB bool) (BacklogPhase, TricklePhase, error) {
	name := "a_alone"
	if withB {
		name = "a_with_b"
	}
	np, err := n.start(ctx, name, tools.KeyLimits{}, true)
	if err != nil {
		return BacklogPhase{}, TricklePhase{}, err
	}
	defer np.stop()
	bar := n.progress.begin(n.cfg.Backlog, 0)
	defer bar.Finish()

	var a BacklogPhase
	var answered atomic.Int64
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		d, errs := np.burstTurns(ctx, tenantA, n.cfg.Backlog, n.cfg.BacklogTurn, n.cfg.Timeout, bar, &answered)
		a = BacklogPhase{Calls: n.cfg.Backlog, Errors: errs, Seconds: d.Seconds(), CallsPerSec: float64(n.cfg.Backlog) / d.Seconds()}
	}()
	var b TricklePhase
	if withB {
		intake := np.intake(tenantA, n.cfg.Backlog, aDone)
		b = n.trickle(ctx, np, aDone)
		b.IntakeMillis = ms(<-intake)
	}
	<-aDone
	runtime.GC()
	return a, b, ctx.Err()
}

// trickle sends B's calls, one each interval (whatever the latency), until
// done is closed, and measures each from request to result.
func (n *noisyRun) trickle(ctx context.Context, np *noisyPool, done <-chan struct{}) TricklePhase {
	var (
		mu    sync.Mutex
		calls []TrickleCall
		errs  int
		wg    sync.WaitGroup
	)
	start := time.Now()
	tick := time.NewTicker(n.cfg.Interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		wg.Go(func() {
			t0 := time.Now()
			ok := np.call(ctx, tenantB, i, n.cfg.Timeout)
			lat := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, TrickleCall{SentMillis: ms(t0.Sub(start)), LatencyMillis: ms(lat)})
			if !ok {
				errs++
			}
		})
		select {
		case <-tick.C:
			continue
		case <-done:
		case <-ctx.Done():
		}
		break
	}
	wg.Wait()
	return TricklePhase{Calls: len(calls), Errors: errs, all: calls}
}

// latencyOf is the exact distribution of ds.
func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(f float64) float64 {
		i := int(f*float64(len(s))+0.5) - 1
		return ms(s[min(max(i, 0), len(s)-1)])
	}
	return Latency{P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999), Max: ms(s[len(s)-1])}
}
