package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
)

// capPhase queues CapCalls calls of tenants A and C at once under a
// per-key concurrency cap and reports the most calls of each key that ran
// at once.
func (n *noisyRun) capPhase(ctx context.Context) (CapPhase, error) {
	name := "cap_" + strconv.Itoa(n.cfg.Cap)
	np, err := n.start(ctx, name, tools.KeyLimits{Concurrency: n.cfg.Cap}, true)
	if err != nil {
		return CapPhase{}, err
	}
	defer np.stop()
	bar := n.progress.begin(2*n.cfg.CapCalls, 0)
	defer bar.Finish()
	var wg sync.WaitGroup
	var errs atomic.Int64
	start := time.Now()
	for _, tenant := range []string{tenantA, tenantC} {
		wg.Go(func() {
			_, e := np.burst(ctx, tenant, n.cfg.CapCalls, n.cfg.Timeout, bar, nil)
			errs.Add(int64(e))
		})
	}
	wg.Wait()
	return CapPhase{
		Cap: n.cfg.Cap, Calls: 2 * n.cfg.CapCalls, Errors: int(errs.Load()),
		Seconds: time.Since(start).Seconds(), MaxRunning: np.probe.maxima(),
	}, ctx.Err()
}

// ratePhase offers tenant A's calls at Offered per second for RateFor
// under a per-key rate limit of Rate per second and reports the rate at
// which they started; the calls still waiting at the end are cancelled
// (their deadlines are far: none expires while it waits).
func (n *noisyRun) ratePhase(ctx context.Context) (RatePhase, error) {
	name := "rate_" + strconv.Itoa(n.cfg.Rate)
	np, err := n.start(ctx, name, tools.KeyLimits{Rate: n.cfg.Rate, Per: time.Second}, true)
	if err != nil {
		return RatePhase{}, err
	}
	defer np.stop()
	calls := int(n.cfg.Offered * n.cfg.RateFor.Seconds())
	bar := n.progress.begin(calls, 0)
	defer bar.Finish()
	interval := time.Duration(float64(time.Second) / n.cfg.Offered)
	offer, endOffer := context.WithCancel(ctx)
	defer endOffer()
	var wg sync.WaitGroup
	var errs, cancelled atomic.Int64
	np.probe.reset()
	start := time.Now()
	for i := range calls {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			if !np.call(offer, tenantA, i, n.cfg.Timeout) {
				if offer.Err() != nil {
					cancelled.Add(1)
				} else {
					errs.Add(1)
				}
			}
			bar.Add(1)
		})
	}
	time.Sleep(time.Until(start.Add(n.cfg.RateFor)))
	starts := np.probe.startsOf(tenantA)
	endOffer()
	wg.Wait()
	inWindow := 0
	for _, at := range starts {
		if at >= time.Second && at < n.cfg.RateFor {
			inWindow++
		}
	}
	return RatePhase{
		Limit: n.cfg.Rate, Offered: n.cfg.Offered, Calls: calls, Served: len(starts),
		ServedPerSec: float64(inWindow) / (n.cfg.RateFor - time.Second).Seconds(),
		Cancelled:    int(cancelled.Load()), Errors: int(errs.Load()),
	}, ctx.Err()
}
