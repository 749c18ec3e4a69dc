package bench

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// target is a system under load: the pool or the baseline.
type target interface {
	// turn runs one agent turn of k calls numbered seq to seq+k-1 and
	// records their outcomes in a.
	turn(ctx context.Context, a *agent, seq uint64, k int)
}

// agent is one simulated agent: it runs one turn at a time and keeps its
// own counts, merged when the load ends.
type agent struct {
	id      int
	session string
	prefix  string // call ids are prefix + sequence number
	rng     *rand.Rand
	mix     FailMix

	hist     *histShard
	calls    uint64 // calls answered (an error counts)
	attempts uint64 // executions reported by the results
	errs     map[string]uint64

	// scratch, reused from turn to turn
	blocks []envelope.ToolUseBlock
	ids    []string
	pafs   []js.PubAckFuture
}

// fail counts n calls that ended in error class.
func (a *agent) fail(class string, n int) {
	if a.errs == nil {
		a.errs = make(map[string]uint64)
	}
	a.errs[class] += uint64(n)
}

// callKind is what a call is made to do.
type callKind uint8

const (
	kindTool      callKind = iota // the loaded tool: echo or sleep
	kindTransient                 // flaky: 503 once, then success
	kindPermanent                 // flaky: 404
)

func (a *agent) pick() callKind {
	if a.mix.Zero() {
		return kindTool
	}
	switch f := a.rng.Float64(); {
	case f < a.mix.Transient:
		return kindTransient
	case f < a.mix.Transient+a.mix.Permanent:
		return kindPermanent
	default:
		return kindTool
	}
}

// loadSpec is one load run.
type loadSpec struct {
	calls       int           // total calls; 0 with duration
	duration    time.Duration // run this long when calls is 0
	concurrency int
	rate        float64 // calls/s, open loop; 0 closed
	batch       int
	prefix      string // call id prefix, unique to the run
	mix         FailMix
	seed        uint64
	progress    *phaseProgress // may be nil
}

// loadResult is what a load run measured.
type loadResult struct {
	hist     histogram
	calls    uint64
	turns    uint64
	attempts uint64
	errs     map[string]uint64
	elapsed  time.Duration
}

// runLoad drives t with the agents of spec until the calls are done, the
// duration has passed or ctx ends.
func runLoad(ctx context.Context, t target, spec loadSpec) loadResult {
	var shards [histShards]histShard
	agents := make([]*agent, spec.concurrency)
	for i := range agents {
		agents[i] = &agent{
			id:      i,
			hist:    &shards[i%histShards],
			session: "bench-agent-" + strconv.Itoa(i),
			prefix:  spec.prefix,
			rng:     rand.New(rand.NewPCG(spec.seed, uint64(i))),
			mix:     spec.mix,
		}
	}
	turns := uint64(0)
	if spec.calls > 0 {
		turns = uint64((spec.calls + spec.batch - 1) / spec.batch)
	}
	k := spec.batch
	start := time.Now()
	var end time.Time
	if spec.calls == 0 {
		end = start.Add(spec.duration)
	}
	done := spec.progress.begin(spec.calls, spec.duration) // nil without a terminal
	defer done.Finish()
	var wg sync.WaitGroup
	if spec.rate <= 0 {
		var next atomic.Uint64
		for _, a := range agents {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := next.Add(1) - 1
					if turns > 0 && i >= turns {
						return
					}
					if turns == 0 && !time.Now().Before(end) {
						return
					}
					t0 := time.Now()
					t.turn(ctx, a, i*uint64(k), k)
					a.hist.record(time.Since(t0))
					done.Add(k)
				}
			})
		}
	} else {
		tickets := make(chan ticket, 1<<16)
		interval := time.Duration(float64(k) / spec.rate * float64(time.Second))
		wg.Go(func() {
			defer close(tickets)
			for i := uint64(0); ctx.Err() == nil; i++ {
				if turns > 0 && i >= turns {
					return
				}
				due := start.Add(time.Duration(i) * interval)
				if turns == 0 && !due.Before(end) {
					return
				}
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				select {
				case tickets <- ticket{seq: i * uint64(k), due: due}:
				case <-ctx.Done():
					return
				}
			}
		})
		for _, a := range agents {
			wg.Go(func() {
				for tk := range tickets {
					if ctx.Err() != nil {
						continue
					}
					t.turn(ctx, a, tk.seq, k)
					a.hist.record(time.Since(tk.due))
					done.Add(k)
				}
			})
		}
	}
	wg.Wait()
	res := loadResult{elapsed: time.Since(start), errs: map[string]uint64{}}
	for i := range shards {
		res.hist.merge(&shards[i].h)
	}
	for _, a := range agents {
		res.calls += a.calls
		res.attempts += a.attempts
		for c, n := range a.errs {
			res.errs[c] += n
		}
	}
	res.turns = res.hist.n
	return res
}

type ticket struct {
	seq uint64
	due time.Time
}

// add sums o into r: the histograms merged, the counts and the elapsed
// times added.
func (r *loadResult) add(o *loadResult) {
	r.hist.merge(&o.hist)
	r.calls += o.calls
	r.turns += o.turns
	r.attempts += o.attempts
	r.elapsed += o.elapsed
	if r.errs == nil {
		r.errs = map[string]uint64{}
	}
	for c, n := range o.errs {
		r.errs[c] += n
	}
}
