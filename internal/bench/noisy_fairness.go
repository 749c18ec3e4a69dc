package bench

import (
	"context"
	"runtime"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
)

// singleSlices is how many parts the single-tenant phases are cut into:
// each mode runs half of them, in pairs (off, on), (on, off), repeated.
const singleSlices = 16

// singleTenant is one tenant's closed-loop load of Calls calls by
// Concurrency agents with the scheduler off, and as many with it on, cut
// into singleSlices parts run in pairs off then on, on then off, and so
// on (each part on a fresh pool). ratio is the median over the pairs of
// on's throughput over off's: each compares two parts run seconds apart,
// so a machine that gets slower or faster (other processes) weighs on
// both alike, and the median drops a pair that a stall hit.
func (n *noisyRun) singleTenant(ctx context.Context) (off, on Phase, ratios []float64, err error) {
	var sums [2]struct {
		res      loadResult
		cpu      time.Duration
		objs, by uint64
	}
	per := singleSlices / 2
	var pair [2]float64 // calls/s of off and on in the current pair
	for i := range singleSlices {
		fair := i%4 == 1 || i%4 == 2
		name := "fairness_off"
		mode := 0
		if fair {
			name, mode = "fairness_on", 1
		}
		// Both modes' k-th parts are in pair k.
		k := i / 2
		calls := n.cfg.Calls*(k+1)/per - n.cfg.Calls*k/per
		np, err := n.start(ctx, name, tools.KeyLimits{}, fair)
		if err != nil {
			return off, on, nil, err
		}
		spec := loadSpec{
			calls: calls, concurrency: n.cfg.Concurrency, batch: 1,
			prefix: np.prefix + "load", seed: uint64(n.phases), progress: n.progress,
		}
		target := &poolTarget{d: np.d, inputs: newCallInputs(n.base)}
		runtime.GC()
		cpu0 := cpuTime()
		objs0, bytes0 := heapAllocs()
		res := runLoad(ctx, target, spec)
		s := &sums[mode]
		s.cpu += cpuTime() - cpu0
		objs1, bytes1 := heapAllocs()
		s.objs += objs1 - objs0
		s.by += bytes1 - bytes0
		s.res.add(&res)
		np.stop()
		if err := ctx.Err(); err != nil {
			return off, on, nil, err
		}
		pair[mode] = float64(res.calls) / res.elapsed.Seconds()
		if i%2 == 1 {
			ratios = append(ratios, ratio(pair[1], pair[0]))
		}
	}
	off = phaseOf("fairness_off", 0, sums[0].res, sums[0].cpu, sums[0].objs, sums[0].by, PeakRSS())
	on = phaseOf("fairness_on", 0, sums[1].res, sums[1].cpu, sums[1].objs, sums[1].by, PeakRSS())
	return off, on, ratios, nil
}
