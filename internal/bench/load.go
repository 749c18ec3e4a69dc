package bench

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/progress"
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
	agents := spec.agents(&shards)
	l := loadRun{t: t, agents: agents, k: spec.batch, start: time.Now()}
	if spec.calls > 0 {
		l.turns = uint64((spec.calls + spec.batch - 1) / spec.batch)
	} else {
		l.end = l.start.Add(spec.duration)
	}
	l.done = spec.progress.begin(spec.calls, spec.duration) // nil without a terminal
	defer l.done.Finish()
	if spec.rate <= 0 {
		l.closedLoop(ctx)
	} else {
		l.openLoop(ctx, spec.rate)
	}
	return collect(&shards, agents, time.Since(l.start))
}

// agents are spec's simulated agents, recording into the shards.
func (spec *loadSpec) agents(shards *[histShards]histShard) []*agent {
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
	return agents
}

// loadRun is one load run under way: turns of k calls, a number of them
// (turns) or until end.
type loadRun struct {
	t      target
	agents []*agent
	k      int
	turns  uint64    // 0: until end
	start  time.Time // of the run
	end    time.Time // with turns 0
	done   *progress.Bar
}

// closedLoop runs the agents, each starting its next turn as soon as its
// last one ended, until the turns are taken, end has passed or ctx ends.
func (l *loadRun) closedLoop(ctx context.Context) {
	t, k, turns, end, done := l.t, l.k, l.turns, l.end, l.done
	var wg sync.WaitGroup
	var next atomic.Uint64
	for _, a := range l.agents {
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
	wg.Wait()
}

// openLoop offers a turn each k/rate seconds, whatever the latency, to the
// first agent free; each turn's latency runs from when it was due.
func (l *loadRun) openLoop(ctx context.Context, rate float64) {
	t, k, done := l.t, l.k, l.done
	tickets := make(chan ticket, 1<<16)
	var wg sync.WaitGroup
	wg.Go(func() { l.issue(ctx, tickets, rate) })
	for _, a := range l.agents {
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
	wg.Wait()
}

// issue sends the open loop's tickets, each when it is due, and closes
// tickets when the turns are taken, end has passed or ctx ends.
func (l *loadRun) issue(ctx context.Context, tickets chan<- ticket, rate float64) {
	defer close(tickets)
	k, turns, start, end := l.k, l.turns, l.start, l.end
	interval := time.Duration(float64(k) / rate * float64(time.Second))
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
}

// collect merges the agents' counts and the shards' histograms, for a run
// that took elapsed.
func collect(shards *[histShards]histShard, agents []*agent, elapsed time.Duration) loadResult {
	res := loadResult{elapsed: elapsed, errs: map[string]uint64{}}
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

// ticket is a turn of the open loop: its first call's number and when it
// is due.
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
