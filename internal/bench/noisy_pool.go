package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/progress"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// noisyPool is one phase's pool and its tool's probe.
type noisyPool struct {
	*pool
	d      *dispatch.Dispatcher
	probe  *probe
	prefix string // call ids: prefix + tenant + number
	input  json.RawMessage
}

// start starts a phase's pool on empty streams: the tool with limits, the
// dispatcher's admission bounds open, the scheduler on or off.
func (n *noisyRun) start(ctx context.Context, name string, limits tools.KeyLimits, fair bool) (*noisyPool, error) {
	if err := n.streams.freshPoolStreams(ctx); err != nil {
		return nil, err
	}
	pr := newProbe()
	reg := tools.NewRegistry()
	if err := reg.Register(noisyTool(n.slots, limits, pr)); err != nil {
		return nil, err
	}
	// The catalog reports the fleet's slots, as the live catalog does
	// from the workers' announcements.
	p, err := startPool(ctx, n.base, n.url, reg, poolOptions{
		catalog: discovery.RegistryCatalogWithSlots(reg, n.slots),
		dispatch: func(c *dispatch.Config) {
			c.MaxCallsInFlight, c.MaxQueueDepth, c.NoQueueWaitAdmission = -1, -1, true
			c.NoFairness = !fair
		},
	})
	if err != nil {
		return nil, err
	}
	n.phases++
	np := &noisyPool{
		pool: p, d: p.orch.Dispatcher(), probe: pr,
		prefix: "toolu_" + n.runID + "_" + strconv.Itoa(n.phases) + "_",
		input:  json.RawMessage(`{"ms":` + strconv.FormatInt(n.cfg.Sleep.Milliseconds(), 10) + `}`),
	}
	// Warm up: connections, consumers, the first pulls.
	n.progress.setLabel(name + " warm-up")
	if _, errs := np.burst(ctx, "warm", 2*n.slots, n.cfg.Timeout, nil, nil); errs > 0 {
		p.stop()
		return nil, fmt.Errorf("bench: %s: %d of the warm-up's calls failed", name, errs)
	}
	pr.reset()
	n.progress.setLabel(name)
	return np, nil
}

// call dispatches tenant's call number i and reports whether it
// succeeded.
func (np *noisyPool) call(ctx context.Context, tenant string, i int, timeout time.Duration) bool {
	return np.turn(ctx, tenant, i, 1, timeout) == 0
}

// turn dispatches tenant's calls number first to first+n-1 in one turn
// and returns how many of them failed.
func (np *noisyPool) turn(ctx context.Context, tenant string, first, n int, timeout time.Duration) int {
	ctx, cancel := context.WithTimeout(dispatch.WithTenant(ctx, tenant), timeout)
	defer cancel()
	calls := make([]envelope.ToolUseBlock, n)
	for j := range calls {
		calls[j] = envelope.ToolUseBlock{Type: "tool_use", ID: np.prefix + tenant + strconv.Itoa(first+j), Name: ToolSleep, Input: np.input}
	}
	res, err := np.d.Dispatch(ctx, "noisy-"+tenant, calls)
	if err != nil || len(res) != n {
		return n
	}
	failed := 0
	for i := range res {
		if res[i].IsError {
			failed++
		}
	}
	return failed
}

// burst dispatches calls of tenant at once, each a Dispatch of its own,
// and returns when all are answered: how long that took and how many
// failed. bar and answered, when set, count the answers.
func (np *noisyPool) burst(ctx context.Context, tenant string, calls int, timeout time.Duration, bar *progress.Bar, answered *atomic.Int64) (time.Duration, int) {
	return np.burstTurns(ctx, tenant, calls, 1, timeout, bar, answered)
}

// burstTurns is burst with turns of turn calls each (the last one
// shorter): calls/turn Dispatch calls at once.
func (np *noisyPool) burstTurns(ctx context.Context, tenant string, calls, turn int, timeout time.Duration, bar *progress.Bar, answered *atomic.Int64) (time.Duration, int) {
	var wg sync.WaitGroup
	var errs atomic.Int64
	start := time.Now()
	for first := 0; first < calls; first += turn {
		n := min(turn, calls-first)
		wg.Go(func() {
			errs.Add(int64(np.turn(ctx, tenant, first, n, timeout)))
			bar.Add(n)
			if answered != nil {
				answered.Add(int64(n))
			}
		})
	}
	wg.Wait()
	return time.Since(start), int(errs.Load())
}

// intake reports, once, how long after now the dispatcher's scheduler had
// taken in all calls of tenant (granted since the scheduler started, or
// waiting: the snapshot accounts for every call it has seen, whatever the
// turns' sizes), or 0 when it never did before done (no scheduler).
func (np *noisyPool) intake(tenant string, calls int, done <-chan struct{}) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				out <- 0
				return
			case <-tick.C:
			}
			seen := 0
			for _, ts := range np.d.SchedSnapshot().Tools {
				for _, k := range ts.Keys {
					if k.Tenant == tenant {
						seen += int(k.Served) + k.Waiting // limited calls are among the waiting
					}
				}
			}
			if seen >= calls {
				out <- time.Since(start)
				return
			}
		}
	}()
	return out
}
