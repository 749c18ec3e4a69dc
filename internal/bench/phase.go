package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// runner runs the phases.
type runner struct {
	cfg                    Config
	url                    string
	js                     js.JetStream // the setup connection's
	embedded               bool
	storage                js.StorageType // of the pool's streams, as the server has them
	reg                    *tools.Registry
	runID                  string
	inputs                 callInputs
	callBytes, resultBytes int
	raw                    rawConfig
	progress               *phaseProgress
	phases                 int
	peakRSS                uint64
}

// phase sets up one phase's system, warms it up, measures it and tears it
// down.
func (r *runner) phase(ctx context.Context, name string, round int) (Phase, error) {
	r.peakRSS = max(r.peakRSS, PeakRSS())
	runtime.GC()
	resetPeakRSS()

	if err := r.cfg.onPhase(ctx, PhaseStarting, name, round); err != nil {
		return Phase{}, err
	}
	t, stop, mix, err := r.startTarget(ctx, name)
	if err != nil {
		return Phase{}, err
	}
	defer stop()

	r.phases++
	prefix := "toolu_" + r.runID + "_" + strconv.Itoa(r.phases) + "_"
	spec := loadSpec{
		concurrency: r.cfg.Concurrency, rate: r.cfg.Rate, batch: r.cfg.Batch,
		mix: mix, seed: uint64(r.phases),
	}
	if err := r.warmUp(ctx, t, spec, prefix+"w", r.label(name, round)+" warm-up"); err != nil {
		return Phase{}, err
	}
	spec.calls, spec.duration, spec.prefix = r.cfg.Calls, r.cfg.Duration, prefix
	r.progress.setLabel(r.label(name, round))
	spec.progress = r.progress
	return r.measure(ctx, t, spec, name, round)
}

// startTarget starts the system of phase name: the baseline, or a fresh
// pool (on fresh streams on the bench's own server), reached directly or
// through a front door. It returns the failure mix the phase loads it
// with, and stop, which tears the system down.
func (r *runner) startTarget(ctx context.Context, name string) (t target, stop func(), mix FailMix, err error) {
	if name == PhaseBaseline {
		t, stop, err = r.startBaseline(ctx)
		return t, stop, FailMix{}, err
	}
	mix = r.cfg.Fail
	if name == PhasePoolNoFailures {
		mix = FailMix{}
	}
	if r.embedded {
		// Empty streams, as the baseline gets: earlier phases' results
		// and message ids would otherwise weigh on the later ones.
		if err := r.freshPoolStreams(ctx); err != nil {
			return nil, nil, mix, err
		}
	}
	p, err := startPool(ctx, r.cfg, r.url, r.reg, poolOptions{})
	if err != nil {
		return nil, nil, mix, err
	}
	front, ok := phaseFront(name)
	if !ok {
		return p.target, p.stop, mix, nil
	}
	ft, stopFront, err := startFront(ctx, front, p, r.cfg)
	if err != nil {
		p.stop()
		return nil, nil, mix, err
	}
	return ft, func() { stopFront(); p.stop() }, mix, nil
}

// startBaseline starts the raw-JetStream baseline, its callers and its
// executors each on a connection of their own.
func (r *runner) startBaseline(ctx context.Context) (target, func(), error) {
	onc, err := r.cfg.Connect(r.url, "toolpool-bench-raw-caller")
	if err != nil {
		return nil, nil, err
	}
	wnc, err := r.cfg.Connect(r.url, "toolpool-bench-raw-worker")
	if err != nil {
		onc.Close()
		return nil, nil, err
	}
	rt, err := startRaw(ctx, r.raw, onc, wnc)
	if err != nil {
		wnc.Close()
		onc.Close()
		return nil, nil, err
	}
	return rt, func() {
		rt.stop(context.Background())
		wnc.Close()
		onc.Close()
	}, nil
}

// warmUp runs the warm-up's calls of spec (none with a negative Warmup)
// under label, with call ids starting with prefix.
func (r *runner) warmUp(ctx context.Context, t target, spec loadSpec, prefix, label string) error {
	if r.cfg.Warmup <= 0 {
		return nil
	}
	spec.calls, spec.prefix = r.cfg.Warmup, prefix
	if spec.rate > 0 {
		spec.calls = max(min(spec.calls, int(spec.rate)), spec.batch)
	}
	r.progress.setLabel(label)
	spec.progress = r.progress
	runLoad(ctx, t, spec)
	return ctx.Err()
}

// measure runs spec's load on t and measures it: its latencies and
// counts, and the process's CPU time, heap allocations and peak RSS
// meanwhile; with a profile asked for, a CPU profile of the first round.
func (r *runner) measure(ctx context.Context, t target, spec loadSpec, name string, round int) (Phase, error) {
	if err := r.cfg.onPhase(ctx, PhaseMeasuring, name, round); err != nil {
		return Phase{}, err
	}
	runtime.GC()
	profile := r.cpuProfile(name, round)
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
	if err := r.cfg.onPhase(ctx, PhaseMeasured, name, round); err != nil {
		return Phase{}, err
	}
	if err := ctx.Err(); err != nil {
		return Phase{}, err
	}
	peak := PeakRSS()
	r.peakRSS = max(r.peakRSS, peak)
	return phaseOf(name, round, res, cpu, objs1-objs0, bytes1-bytes0, peak), nil
}

// cpuProfile is where the CPU profile of phase name goes, nil for none:
// only the first round's phases are profiled.
func (r *runner) cpuProfile(name string, round int) io.Writer {
	if round != 1 {
		return nil
	}
	switch name {
	case PhaseBaseline:
		return r.cfg.BaselineCPUProfile
	case PhasePool:
		return r.cfg.CPUProfile
	}
	if front, ok := phaseFront(name); ok {
		return r.cfg.FrontCPUProfiles[front]
	}
	return nil
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
