package bench

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// probe is the tool's view of the fleet: the calls of each key running
// at once (the workers are in this process, so it sees all of them), the
// most it saw, and when each call started.
type probe struct {
	t0      time.Time
	mu      sync.Mutex
	running map[string]int
	max     map[string]int
	starts  map[string][]time.Duration // since t0
}

func newProbe() *probe {
	return &probe{t0: time.Now(), running: map[string]int{}, max: map[string]int{}, starts: map[string][]time.Duration{}}
}

func (p *probe) begin(key string) {
	at := time.Since(p.t0)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[key]++
	p.max[key] = max(p.max[key], p.running[key])
	p.starts[key] = append(p.starts[key], at)
}

func (p *probe) end(key string) {
	p.mu.Lock()
	p.running[key]--
	p.mu.Unlock()
}

// reset forgets what was seen so far (the warm-up's calls) and restarts
// the clock.
func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t0 = time.Now()
	clear(p.max)
	clear(p.starts)
}

func (p *probe) maxima() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.max))
	for k, v := range p.max {
		out[k] = v
	}
	return out
}

// startsOf are the start times of key's calls since the last reset.
func (p *probe) startsOf(key string) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.starts[key])
}

// noisyTool is the scenario's tool: demo's sleep, whose fleet-wide
// concurrency is the fleet's slots, with the phase's per-key limits, its
// handler reporting each call's key (its tenant) to pr.
func noisyTool(slots int, limits tools.KeyLimits, pr *probe) tools.Tool {
	t := demo.Sleep()
	t.Concurrency = slots
	t.PerKey = limits
	sleep := t.Handler
	t.Handler = func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
		ci, _ := tools.CallInfoFrom(ctx)
		pr.begin(ci.Tenant)
		defer pr.end(ci.Tenant)
		return sleep(ctx, input)
	}
	return t
}
