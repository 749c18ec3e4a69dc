package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/progress"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// The scenarios of `orchestrator bench --scenario`.
const (
	// ScenarioThroughput is Run: the pool against a raw-JetStream
	// baseline (the default).
	ScenarioThroughput = "throughput"
	// ScenarioNoisyNeighbour is RunNoisyNeighbour: fair shares, per-key
	// limits and the cost of the scheduler (issue 15).
	ScenarioNoisyNeighbour = "noisy-neighbour"
)

// Defaults of NoisyConfig.
const (
	NoisyWorkersDefault           = 2
	NoisyWorkerConcurrencyDefault = 32 // 2 × 32 = 64 slots fleet-wide
	NoisySleepDefault             = 20 * time.Millisecond
	NoisyBacklogDefault           = 20_000
	NoisyIntervalDefault          = 100 * time.Millisecond
	NoisyCallsDefault             = 50_000
	NoisyConcurrencyDefault       = 256
	NoisyCapDefault               = 8
	NoisyCapCallsDefault          = 1_000
	NoisyRateDefault              = 50
	NoisyOfferedDefault           = 200
	NoisyRateForDefault           = 5 * time.Second
	NoisyTimeoutDefault           = 60 * time.Second
)

// The tenants of the scenario.
const (
	tenantA = "A" // the noisy one
	tenantB = "B" // the neighbour
	tenantC = "C" // a second key of the cap phase
)

// NoisyConfig configures RunNoisyNeighbour. Zero fields take the
// documented defaults. The scenario runs on an embedded server of its own,
// with in-process workers assembled by the root package.
type NoisyConfig struct {
	// Storage of the embedded server's streams. Default file storage.
	Storage js.StorageType
	// Workers and WorkerConcurrency make the fleet: Workers in-process
	// workers of WorkerConcurrency slots each; the tool's Concurrency
	// (MaxAckPending) is their product, and so is the Slots the
	// dispatcher's catalog reports. Defaults NoisyWorkersDefault and
	// NoisyWorkerConcurrencyDefault (64 slots).
	Workers, WorkerConcurrency int
	// Sleep is how long each call of the tool takes. Default
	// NoisySleepDefault.
	Sleep time.Duration
	// Backlog is how many calls tenant A queues at once. Default
	// NoisyBacklogDefault.
	Backlog int
	// BacklogTurn is how many of A's calls each of its turns carries (one
	// Dispatch each): 1 (the default) is Backlog agents posting one call
	// each, so the load generator runs Backlog goroutines at once; 20 is
	// Backlog/20 agents whose turns fan out 20 parallel calls.
	BacklogTurn int
	// Interval is tenant B's pace: one call each Interval while A's
	// backlog drains. Default NoisyIntervalDefault.
	Interval time.Duration
	// Calls is the number of calls of each of the single-tenant phases
	// (fairness off, fairness on). Default NoisyCallsDefault.
	Calls int
	// Concurrency is the agents of the single-tenant phases, each running
	// one call at a time. Default NoisyConcurrencyDefault.
	Concurrency int
	// Cap is the per-key concurrency cap of the cap phase, where tenants A
	// and C queue CapCalls calls each. Defaults NoisyCapDefault and
	// NoisyCapCallsDefault.
	Cap, CapCalls int
	// Rate is the per-key rate limit (calls per second) of the rate phase,
	// where tenant A offers Offered calls per second for RateFor; the
	// calls still waiting then are cancelled. Defaults NoisyRateDefault,
	// NoisyOfferedDefault, NoisyRateForDefault.
	Rate    int
	Offered float64
	RateFor time.Duration
	// Timeout is the deadline of every other call. Default
	// NoisyTimeoutDefault.
	Timeout time.Duration
	// Progress, when set, receives a progress bar (a terminal).
	Progress io.Writer
	// Logger receives the pool's and the embedded server's logs. Default:
	// discarded.
	Logger *slog.Logger
}

func (c NoisyConfig) withDefaults() NoisyConfig {
	c.Workers = cmp.Or(c.Workers, NoisyWorkersDefault)
	c.WorkerConcurrency = cmp.Or(c.WorkerConcurrency, NoisyWorkerConcurrencyDefault)
	c.Sleep = cmp.Or(c.Sleep, NoisySleepDefault)
	c.Backlog = cmp.Or(c.Backlog, NoisyBacklogDefault)
	c.BacklogTurn = cmp.Or(c.BacklogTurn, 1)
	c.Interval = cmp.Or(c.Interval, NoisyIntervalDefault)
	c.Calls = cmp.Or(c.Calls, NoisyCallsDefault)
	c.Concurrency = cmp.Or(c.Concurrency, NoisyConcurrencyDefault)
	c.Cap = cmp.Or(c.Cap, NoisyCapDefault)
	c.CapCalls = cmp.Or(c.CapCalls, NoisyCapCallsDefault)
	c.Rate = cmp.Or(c.Rate, NoisyRateDefault)
	c.Offered = cmp.Or(c.Offered, NoisyOfferedDefault)
	c.RateFor = cmp.Or(c.RateFor, NoisyRateForDefault)
	c.Timeout = cmp.Or(c.Timeout, NoisyTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c NoisyConfig) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("bench: workers must be at least 1, got %d", c.Workers)
	case c.WorkerConcurrency < 1:
		return fmt.Errorf("bench: worker concurrency must be at least 1, got %d", c.WorkerConcurrency)
	case c.Sleep < 0:
		return fmt.Errorf("bench: sleep must not be negative, got %v", c.Sleep)
	case c.Backlog < 1:
		return fmt.Errorf("bench: backlog must be at least 1, got %d", c.Backlog)
	case c.BacklogTurn < 1 || c.BacklogTurn > c.Backlog:
		return fmt.Errorf("bench: backlog turn must be from 1 to the backlog (%d), got %d", c.Backlog, c.BacklogTurn)
	case c.Interval <= 0:
		return fmt.Errorf("bench: interval must be positive, got %v", c.Interval)
	case c.Calls < 1 || c.Concurrency < 1 || c.Cap < 1 || c.CapCalls < 1 || c.Rate < 1:
		return errors.New("bench: calls, concurrency, cap, cap calls and rate must be at least 1")
	case c.Offered <= 0 || c.RateFor <= time.Second || c.Timeout <= 0:
		return errors.New("bench: offered rate, deadlines and timeout must be positive, and the rate phase longer than 1s")
	}
	return nil
}

// NoisyReport is what RunNoisyNeighbour measured.
type NoisyReport struct {
	Machine  Machine       `json:"machine"`
	Settings NoisySettings `json:"settings"`
	// AAlone is tenant A's backlog with nobody else; WithB the same
	// backlog with tenant B's trickle; B is B's calls in that phase.
	AAlone BacklogPhase `json:"a_alone"`
	WithB  BacklogPhase `json:"a_with_b"`
	B      TricklePhase `json:"b"`
	// Cap is the per-key concurrency cap phase, Rate the per-key rate
	// limit phase.
	Cap  CapPhase  `json:"cap"`
	Rate RatePhase `json:"rate"`
	// FairnessOff and FairnessOn are one tenant's closed-loop load with
	// the scheduler off and on.
	FairnessOff Phase `json:"fairness_off"`
	FairnessOn  Phase `json:"fairness_on"`
	// FairnessRatio is the median of FairnessPairRatios: on's throughput
	// over off's in each pair of parts run one after the other.
	FairnessRatio      float64   `json:"fairness_ratio"`
	FairnessPairRatios []float64 `json:"fairness_pair_ratios"`
	// Targets are the targets and whether this run met them.
	Targets []Target `json:"targets"`
	// PeakRSSBytes is the peak resident set size of the whole run.
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
}

// NoisySettings echo the scenario's configuration in the report.
type NoisySettings struct {
	Scenario          string  `json:"scenario"`
	Storage           string  `json:"storage"`
	Workers           int     `json:"workers"`
	WorkerConcurrency int     `json:"worker_concurrency"`
	Slots             int     `json:"slots"`
	SleepMillis       float64 `json:"sleep_ms"`
	Backlog           int     `json:"backlog"`
	BacklogTurn       int     `json:"backlog_turn"`
	IntervalMillis    float64 `json:"b_interval_ms"`
	Calls             int     `json:"calls"`
	Concurrency       int     `json:"concurrency"`
	Cap               int     `json:"cap"`
	CapCalls          int     `json:"cap_calls_per_key"`
	Rate              int     `json:"rate_per_s"`
	Offered           float64 `json:"offered_per_s"`
	RateForSeconds    float64 `json:"rate_for_s"`
	// Admission says how the dispatcher's admission bounds were set so
	// that the backlog is admitted whole.
	Admission string `json:"admission"`
}

// BacklogPhase is tenant A's backlog: Calls dispatched at once, answered
// over Seconds.
type BacklogPhase struct {
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"calls_per_s"`
}

// TricklePhase is tenant B's calls, one per interval, request to result.
type TricklePhase struct {
	Calls   int     `json:"calls"`
	Errors  int     `json:"errors"`
	Latency Latency `json:"latency_ms"`
	// Slowest are the slowest calls (at most slowestShown), slowest
	// first: when in the phase each was sent, and its latency.
	Slowest []TrickleCall `json:"slowest"`
	// Intakes are, for each phase with B, when the dispatcher had taken
	// in all of A's backlog (from its start; 0: not seen, e.g. without a
	// scheduler); AfterIntake is the latency of the AfterIntakeCalls calls
	// of B sent from then on.
	Intakes          []float64 `json:"intake_ms"`
	AfterIntake      Latency   `json:"after_intake_latency_ms"`
	AfterIntakeCalls int       `json:"after_intake_calls"`

	// Of one phase (backlog): its intake, and every call.
	IntakeMillis float64       `json:"-"`
	all          []TrickleCall // slowest first once merged
}

// TrickleCall is one of B's calls: when it was sent, from the start of
// A's backlog, and how long it took, in milliseconds.
type TrickleCall struct {
	SentMillis    float64 `json:"sent_ms"`
	LatencyMillis float64 `json:"latency_ms"`
}

// slowestShown is how many of B's slowest calls a report lists.
const slowestShown = 5

// CapPhase is the per-key concurrency cap: the most calls of each key the
// tool's handler saw running at once, fleet-wide.
type CapPhase struct {
	Cap        int            `json:"cap"`
	Calls      int            `json:"calls"`
	Errors     int            `json:"errors"`
	Seconds    float64        `json:"seconds"`
	MaxRunning map[string]int `json:"max_running"`
}

// RatePhase is the per-key rate limit: a key offering more than its limit.
type RatePhase struct {
	Limit   int     `json:"limit_per_s"`
	Offered float64 `json:"offered_per_s"`
	Calls   int     `json:"calls"`
	// Served is the calls that ran; ServedPerSec their rate from 1 s
	// after the offer began (after the first burst) to its end.
	Served       int     `json:"served"`
	ServedPerSec float64 `json:"served_per_s"`
	// Cancelled is the calls not answered when the offer ended (nearly
	// all still held by their key's limit), then cancelled; Errors the
	// calls answered with an is_error before.
	Cancelled int `json:"cancelled"`
	Errors    int `json:"errors"`
}

// Target is one of the targets.
type Target struct {
	Name     string  `json:"name"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit,omitempty"`
	Goal     string  `json:"goal"`
	Met      bool    `json:"met"`
}

// RunNoisyNeighbour runs the noisy-neighbour scenario: tenant A's backlog
// alone, then with tenant B's trickle; a per-key concurrency cap; a per-key
// rate limit; one tenant with the scheduler off and on. Each phase gets a
// fresh pool and empty streams on one embedded server.
func RunNoisyNeighbour(ctx context.Context, cfg NoisyConfig) (*NoisyReport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "toolpool-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	emb, err := embedded.Start(embedded.Options{Listen: "127.0.0.1:0", DataDir: dir, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer emb.Shutdown()
	base := Config{
		Workers: cfg.Workers, WorkerConcurrency: cfg.WorkerConcurrency, Storage: cfg.Storage,
		TurnTimeout: cfg.Timeout, Logger: cfg.Logger, Tool: ToolSleep, Sleep: cfg.Sleep,
	}.withDefaults()
	nc, err := base.Connect(emb.ClientURL(), "toolpool-bench")
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		return nil, err
	}
	n := &noisyRun{
		cfg: cfg, base: base, url: emb.ClientURL(), slots: cfg.Workers * cfg.WorkerConcurrency,
		streams: &runner{cfg: base, js: j}, runID: nuidShort(), progress: newProgress(cfg.Progress),
	}
	if err := n.streams.freshPoolStreams(ctx); err != nil {
		return nil, err
	}
	rep := &NoisyReport{Machine: machine(), Settings: NoisySettings{
		Scenario: ScenarioNoisyNeighbour, Storage: storageName(cfg.Storage),
		Workers: cfg.Workers, WorkerConcurrency: cfg.WorkerConcurrency, Slots: n.slots,
		SleepMillis: ms(cfg.Sleep), Backlog: cfg.Backlog, BacklogTurn: cfg.BacklogTurn, IntervalMillis: ms(cfg.Interval),
		Calls: cfg.Calls, Concurrency: cfg.Concurrency, Cap: cfg.Cap, CapCalls: cfg.CapCalls,
		Rate: cfg.Rate, Offered: cfg.Offered, RateForSeconds: cfg.RateFor.Seconds(),
		Admission: "calls in flight and queue depth unbounded, queue-wait refusal off: the whole backlog is admitted",
	}}
	if rep.AAlone, rep.WithB, rep.B, err = n.backlogs(ctx); err != nil {
		return nil, err
	}
	if rep.Cap, err = n.capPhase(ctx); err != nil {
		return nil, err
	}
	if rep.Rate, err = n.ratePhase(ctx); err != nil {
		return nil, err
	}
	if rep.FairnessOff, rep.FairnessOn, rep.FairnessPairRatios, err = n.singleTenant(ctx); err != nil {
		return nil, err
	}
	rep.FairnessRatio = median(rep.FairnessPairRatios)
	rep.Targets = n.targets(rep)
	rep.PeakRSSBytes = PeakRSS()
	return rep, nil
}

func storageName(s js.StorageType) string {
	if s == js.MemoryStorage {
		return "memory"
	}
	return "file"
}

// noisyRun runs the scenario's phases.
type noisyRun struct {
	cfg      NoisyConfig
	base     Config // for startPool
	url      string
	slots    int
	streams  *runner // freshPoolStreams
	runID    string
	phases   int
	progress *phaseProgress
}

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

// targets are the targets against what rep measured.
func (n *noisyRun) targets(rep *NoisyReport) []Target {
	bGoal := 5*ms(n.cfg.Sleep) + 50
	maxRun := 0
	for _, v := range rep.Cap.MaxRunning {
		maxRun = max(maxRun, v)
	}
	rateLo, rateHi := 0.9*float64(n.cfg.Rate), 1.1*float64(n.cfg.Rate)
	aRatio := ratio(rep.WithB.CallsPerSec, rep.AAlone.CallsPerSec)
	fRatio := rep.FairnessRatio
	return []Target{
		{Name: "B's p99, request to result", Measured: rep.B.Latency.P99, Unit: "ms",
			Goal: fmt.Sprintf("≤ %g ms (5 × %g ms + 50 ms)", bGoal, ms(n.cfg.Sleep)), Met: rep.B.Calls > 0 && rep.B.Errors == 0 && rep.B.Latency.P99 <= bGoal},
		{Name: "A's throughput with B / alone", Measured: aRatio * 100, Unit: "%",
			Goal: "≥ 90 %", Met: aRatio >= 0.9 && rep.WithB.Errors == 0},
		{Name: fmt.Sprintf("most calls of a key running, cap %d", n.cfg.Cap), Measured: float64(maxRun),
			Goal: fmt.Sprintf("≤ %d", n.cfg.Cap), Met: maxRun > 0 && maxRun <= n.cfg.Cap && rep.Cap.Errors == 0},
		{Name: fmt.Sprintf("served/s of a key, limit %d/s, offered %g/s", n.cfg.Rate, n.cfg.Offered), Measured: rep.Rate.ServedPerSec, Unit: "/s",
			Goal: fmt.Sprintf("%d ± 10 %% (%.4g to %.4g)", n.cfg.Rate, rateLo, rateHi), Met: rep.Rate.ServedPerSec >= rateLo && rep.Rate.ServedPerSec <= rateHi},
		{Name: "one tenant's throughput, fairness on / off (median of pairs)", Measured: fRatio,
			Goal: "≥ 0.95", Met: fRatio >= 0.95 && rep.FairnessOn.ErrorCalls == 0},
	}
}
