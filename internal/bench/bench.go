package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// The baseline's own streams: the pool's configurations under other names
// and subjects, so nothing it does touches the pool's streams or consumers.
const (
	rawCallStream    = "BENCH_RAW_CALLS"
	rawResultStream  = "BENCH_RAW_RESULTS"
	rawCallSubject   = "benchraw.call.echo"
	rawResultSubject = "benchraw.result.bench"
	rawConsumer      = "bench_raw"
)

func nuidShort() string { return nuid.Next()[12:] }

// Run runs the bench: per round the raw-JetStream baseline, then (with
// failures) the pool without failures, then the pool, each warmed up and
// then measured under the same load.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	url, server := cfg.NATSURL, "external"
	if url == "" {
		dir, err := os.MkdirTemp("", "toolpool-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		emb, err := embedded.Start(embedded.Options{
			Listen: "127.0.0.1:0", DataDir: dir, Logger: cfg.Logger,
		})
		if err != nil {
			return nil, err
		}
		defer emb.Shutdown()
		url, server = emb.ClientURL(), "embedded"
	}
	nc, err := cfg.Connect(url, "toolpool-bench")
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		return nil, err
	}
	callsCfg, resultsCfg, err := poolStreams(ctx, j, cfg, server == "embedded")
	if err != nil {
		return nil, err
	}
	reg, err := benchRegistry(cfg)
	if err != nil {
		return nil, err
	}
	r := &runner{
		cfg: cfg, url: url, js: j, embedded: server == "embedded",
		reg: reg, runID: nuidShort(), progress: newProgress(cfg.Progress),
	}
	r.inputs = newCallInputs(cfg)
	r.callBytes, r.resultBytes, err = messageSizes(cfg, r.inputs)
	if err != nil {
		return nil, err
	}
	r.raw = r.rawConfig(callsCfg, resultsCfg)

	rep := &Report{Machine: machine(), Settings: Settings{
		Server: server, Storage: strings.ToLower(callsCfg.Storage.String()),
		Workers: cfg.Workers, WorkerConcurrency: cfg.WorkerConcurrency,
		Calls: cfg.Calls, DurationSeconds: cfg.Duration.Seconds(), Warmup: max(cfg.Warmup, 0),
		Concurrency: cfg.Concurrency, Rate: cfg.Rate, Batch: cfg.Batch, Tool: cfg.Tool,
		Payload: cfg.Payload, CallBytes: r.callBytes, ResultBytes: r.resultBytes,
		Fail: cfg.Fail.String(), Rounds: cfg.Rounds, Fronts: cfg.Fronts,
	}}
	if cfg.ExternalWorkers {
		rep.Settings.Workers = 0
	}
	if cfg.Tool == ToolSleep {
		rep.Settings.SleepMillis = ms(cfg.Sleep)
	}
	for round := 1; round <= cfg.Rounds; round++ {
		if !cfg.SkipBaseline {
			p, err := r.phase(ctx, PhaseBaseline, round)
			if err != nil {
				return nil, err
			}
			rep.Runs = append(rep.Runs, p)
		}
		if !cfg.Fail.Zero() {
			p, err := r.phase(ctx, PhasePoolNoFailures, round)
			if err != nil {
				return nil, err
			}
			rep.Runs = append(rep.Runs, p)
		}
		p, err := r.phase(ctx, PhasePool, round)
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, p)
		for _, front := range cfg.Fronts {
			p, err := r.phase(ctx, frontPhase(front), round)
			if err != nil {
				return nil, err
			}
			rep.Runs = append(rep.Runs, p)
		}
	}
	rep.summarise()
	rep.PeakRSSBytes = max(r.peakRSS, PeakRSS())
	if cfg.MemProfile != nil {
		if err := pprof.Lookup("allocs").WriteTo(cfg.MemProfile, 0); err != nil {
			return nil, fmt.Errorf("bench: memory profile: %w", err)
		}
	}
	return rep, nil
}

// poolStreams makes sure the pool's streams exist (provisioning them on
// the embedded server, or on a server that lacks them) and returns the
// configurations of TOOL_CALLS and TOOL_RESULTS as the server has them.
func poolStreams(ctx context.Context, j js.JetStream, cfg Config, embedded bool) (calls, results js.StreamConfig, err error) {
	_, err = j.Stream(ctx, jetstream.StreamCalls)
	if embedded || errors.Is(err, js.ErrStreamNotFound) {
		err = jetstream.Provision(ctx, j, jetstream.Config{Storage: cfg.Storage})
	}
	if err != nil {
		return calls, results, fmt.Errorf("bench: streams: %w", err)
	}
	for _, x := range []struct {
		name string
		out  *js.StreamConfig
	}{{jetstream.StreamCalls, &calls}, {jetstream.StreamResults, &results}} {
		s, err := j.Stream(ctx, x.name)
		if err != nil {
			return calls, results, fmt.Errorf("bench: stream %s: %w", x.name, err)
		}
		*x.out = s.CachedInfo().Config
	}
	return calls, results, nil
}

// messageSizes encodes a typical call and result of the loaded tool, as
// the dispatcher and the worker do, for the baseline to send as much.
func messageSizes(cfg Config, in callInputs) (call, result int, err error) {
	now := time.Now()
	id := "toolu_" + nuidShort() + "_" + strconv.Itoa(cfg.Calls/2+100000) + "_"
	c, err := envelope.EncodeCall(&envelope.Call{
		ID: id, Tool: cfg.Tool, Input: in.inputs[kindTool], Session: "bench-agent-" + strconv.Itoa(cfg.Concurrency/2),
		ReplyTo: "bench-" + nuidShort(), CreatedAt: now, Deadline: now.Add(cfg.TurnTimeout),
		Traceparent: dispatch.NewTraceparent(),
	})
	if err != nil {
		return 0, 0, err
	}
	text := "slept " + strconv.FormatInt(cfg.Sleep.Milliseconds(), 10) + " ms"
	if cfg.Tool == ToolEcho {
		text = strings.Repeat("x", cfg.Payload-minPayload)
	}
	host, _ := os.Hostname()
	res, err := envelope.EncodeResult(&envelope.Result{
		CallID: id, Tool: cfg.Tool, Content: envelope.Text(text), Attempts: 1,
		WorkerID:  host + "-" + strconv.Itoa(os.Getpid()) + "-" + nuidShort()[:6],
		QueueWait: 1234567 * time.Nanosecond, ExecTime: 12345 * time.Nanosecond,
	})
	if err != nil {
		return 0, 0, err
	}
	return len(c), len(res), nil
}

// runner runs the phases.
type runner struct {
	cfg                    Config
	url                    string
	js                     js.JetStream // the setup connection's
	embedded               bool
	reg                    *tools.Registry
	runID                  string
	inputs                 callInputs
	callBytes, resultBytes int
	raw                    rawConfig
	progress               *phaseProgress
	phases                 int
	peakRSS                uint64
}

// rawConfig is the baseline's setup: the pool's stream configurations and
// the loaded tool's consumer configuration, renamed.
func (r *runner) rawConfig(calls, results js.StreamConfig) rawConfig {
	calls.Name, calls.Subjects = rawCallStream, []string{"benchraw.call.>"}
	calls.Description = "toolpool bench: raw baseline calls"
	results.Name, results.Subjects = rawResultStream, []string{"benchraw.result.>"}
	results.Description = "toolpool bench: raw baseline results"
	rt, _ := r.reg.Lookup(r.cfg.Tool)
	cc := jetstream.ConsumerConfig(jetstream.ConsumerSpec{
		Tool: rt.Name, Timeout: rt.Timeout, MaxAttempts: rt.Retry.MaxAttempts, Concurrency: rt.Concurrency,
	})
	cc.Durable, cc.Name, cc.FilterSubject, cc.Description = rawConsumer, "", rawCallSubject, "toolpool bench: raw baseline"
	work := time.Duration(0)
	if r.cfg.Tool == ToolSleep {
		work = r.cfg.Sleep
	}
	return rawConfig{
		callStream: calls, resultStream: results, consumer: cc,
		callSubject: rawCallSubject, resultSubject: rawResultSubject,
		callSize: r.callBytes, resultSize: r.resultBytes,
		// The dispatcher sends the call's trace context in a header too.
		traceparent: dispatch.NewTraceparent(),
		executors:   r.cfg.Workers * r.cfg.WorkerConcurrency,
		// As pkg/worker pulls.
		pullMax:     min(r.cfg.WorkerConcurrency, 512),
		work:        work,
		turnTimeout: r.cfg.TurnTimeout,
	}
}

// phase sets up one phase's system, warms it up, measures it and tears it
// down.
func (r *runner) phase(ctx context.Context, name string, round int) (Phase, error) {
	r.peakRSS = max(r.peakRSS, PeakRSS())
	runtime.GC()
	resetPeakRSS()

	var t target
	var stop func()
	mix := r.cfg.Fail
	switch name {
	case PhaseBaseline:
		onc, err := r.cfg.Connect(r.url, "toolpool-bench-raw-caller")
		if err != nil {
			return Phase{}, err
		}
		defer onc.Close()
		wnc, err := r.cfg.Connect(r.url, "toolpool-bench-raw-worker")
		if err != nil {
			return Phase{}, err
		}
		defer wnc.Close()
		rt, err := startRaw(ctx, r.raw, onc, wnc)
		if err != nil {
			return Phase{}, err
		}
		t, stop = rt, func() { rt.stop(context.Background()) }
		mix = FailMix{}
	default:
		if name == PhasePoolNoFailures {
			mix = FailMix{}
		}
		if r.embedded {
			// Empty streams, as the baseline gets: earlier phases' results
			// and message ids would otherwise weigh on the later ones.
			if err := r.freshPoolStreams(ctx); err != nil {
				return Phase{}, err
			}
		}
		p, err := startPool(ctx, r.cfg, r.url, r.reg, poolOptions{})
		if err != nil {
			return Phase{}, err
		}
		t, stop = p.target, p.stop
		if name == PhasePoolHTTP || name == PhasePoolMCP {
			front := FrontHTTP
			if name == PhasePoolMCP {
				front = FrontMCP
			}
			ft, stopFront, err := startFront(ctx, front, p, r.cfg)
			if err != nil {
				p.stop()
				return Phase{}, err
			}
			t, stop = ft, func() { stopFront(); p.stop() }
		}
	}
	defer stop()

	r.phases++
	prefix := "toolu_" + r.runID + "_" + strconv.Itoa(r.phases) + "_"
	spec := loadSpec{
		concurrency: r.cfg.Concurrency, rate: r.cfg.Rate, batch: r.cfg.Batch,
		mix: mix, seed: uint64(r.phases),
	}
	if r.cfg.Warmup > 0 {
		warm := spec
		warm.calls, warm.prefix = r.cfg.Warmup, prefix+"w"
		if warm.rate > 0 {
			warm.calls = max(min(warm.calls, int(warm.rate)), warm.batch)
		}
		r.progress.setLabel(r.label(name, round) + " warm-up")
		warm.progress = r.progress
		runLoad(ctx, t, warm)
		if err := ctx.Err(); err != nil {
			return Phase{}, err
		}
	}
	spec.calls, spec.duration, spec.prefix = r.cfg.Calls, r.cfg.Duration, prefix
	r.progress.setLabel(r.label(name, round))
	spec.progress = r.progress

	runtime.GC()
	var profile io.Writer
	switch name {
	case PhaseBaseline:
		profile = r.cfg.BaselineCPUProfile
	case PhasePool:
		profile = r.cfg.CPUProfile
	case PhasePoolHTTP:
		profile = r.cfg.FrontCPUProfiles[FrontHTTP]
	case PhasePoolMCP:
		profile = r.cfg.FrontCPUProfiles[FrontMCP]
	}
	if round != 1 {
		profile = nil
	}
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return Phase{}, fmt.Errorf("bench: cpu profile: %w", err)
		}
	}
	cpu0 := cpuTime()
	objs0, bytes0 := heapAllocs()
	res := runLoad(ctx, t, spec)
	cpu := cpuTime() - cpu0
	objs1, bytes1 := heapAllocs()
	if profile != nil {
		pprof.StopCPUProfile()
	}
	if err := ctx.Err(); err != nil {
		return Phase{}, err
	}
	peak := PeakRSS()
	r.peakRSS = max(r.peakRSS, peak)

	return phaseOf(name, round, res, cpu, objs1-objs0, bytes1-bytes0, peak), nil
}

// phaseOf is what a load run measured, as a Phase: cpu is the process's
// CPU time during the run, objs and bytes its heap allocations, peak its
// peak RSS.
func phaseOf(name string, round int, res loadResult, cpu time.Duration, objs, bytes, peak uint64) Phase {
	p := Phase{
		Name: name, Round: round, Calls: res.calls, Turns: res.turns,
		Seconds: res.elapsed.Seconds(), Errors: res.errs,
		Latency: Latency{
			P50: ms(res.hist.quantile(0.50)), P90: ms(res.hist.quantile(0.90)),
			P99: ms(res.hist.quantile(0.99)), P999: ms(res.hist.quantile(0.999)), Max: ms(res.hist.max),
		},
		PeakRSSBytes: peak,
	}
	for _, n := range res.errs {
		p.ErrorCalls += n
	}
	if res.calls > 0 {
		p.CallsPerSec = float64(res.calls) / res.elapsed.Seconds()
		p.AttemptsPerCall = float64(res.attempts) / float64(res.calls)
		p.CPUPerCallMicros = float64(cpu) / float64(time.Microsecond) / float64(res.calls)
		p.AllocsPerCall = float64(objs) / float64(res.calls)
		p.AllocBytesPerCall = float64(bytes) / float64(res.calls)
	}
	return p
}

// label names a phase on the progress bar.
func (r *runner) label(name string, round int) string {
	if r.cfg.Rounds == 1 {
		return name
	}
	return fmt.Sprintf("%s %d/%d", name, round, r.cfg.Rounds)
}

// freshPoolStreams deletes the pool's call and result streams (and with
// them the tools' consumers, which the workers create again) and
// provisions them anew. Only on the bench's own embedded server.
func (r *runner) freshPoolStreams(ctx context.Context) error {
	for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults} {
		if err := r.js.DeleteStream(ctx, name); err != nil && !errors.Is(err, js.ErrStreamNotFound) {
			return fmt.Errorf("bench: delete stream %s: %w", name, err)
		}
	}
	if err := jetstream.Provision(ctx, r.js, jetstream.Config{Storage: r.cfg.Storage}); err != nil {
		return fmt.Errorf("bench: streams: %w", err)
	}
	return nil
}
