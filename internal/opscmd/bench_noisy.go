package opscmd

import (
	"context"
	"time"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/progress"
)

// The flags of the noisy-neighbour scenario only, and those of the
// throughput scenario that it does not take.
var (
	noisyOnlyFlags  = []string{"backlog", "backlog-turn", "b-interval", "key-cap", "key-cap-calls", "key-rate", "key-rate-for"}
	noisyNoneOfThem = []string{
		"nats-url", "duration", "warmup", "rate", "batch", "tool", "payload", "front", "fail", "transient-delay",
		"baseline", "rounds", "turn-timeout", "cpuprofile", "http-cpuprofile", "mcp-cpuprofile", "mcp-sdk-cpuprofile", "baseline-cpuprofile", "memprofile",
	}
)

// runNoisy is "orchestrator bench --scenario noisy-neighbour".
func (b *benchCmd) runNoisy(ctx context.Context, env *cli.Env) error {
	if err := b.noisyConfig(env); err != nil {
		return err
	}
	log, err := b.log.Logger(env.Stderr)
	if err != nil {
		return err
	}
	b.noisy.Logger = log
	b.noisy.Progress = progress.Terminal(env.Stderr)
	rep, err := bench.RunNoisyNeighbour(ctx, b.noisy)
	if err != nil {
		return err
	}
	return b.writeReport(env, rep)
}

// noisyConfig completes noisy from the flags: those it shares with the
// throughput scenario (workers, worker concurrency, sleep, calls,
// concurrency, storage) keep the scenario's own defaults unless given.
// Its errors are usage errors naming the flag.
func (b *benchCmd) noisyConfig(env *cli.Env) error {
	noisy, cfg := &b.noisy, &b.cfg
	for _, name := range noisyNoneOfThem {
		if env.Given(name) {
			return cli.Usagef("--%s does not apply to --scenario %s", name, bench.ScenarioNoisyNeighbour)
		}
	}
	for _, f := range []struct {
		name     string
		from, to *int
	}{
		{"workers", &cfg.Workers, &noisy.Workers}, {"worker-concurrency", &cfg.WorkerConcurrency, &noisy.WorkerConcurrency},
		{"calls", &cfg.Calls, &noisy.Calls}, {"concurrency", &cfg.Concurrency, &noisy.Concurrency},
	} {
		if env.Given(f.name) {
			if *f.from < 1 {
				return cli.Usagef("--%s must be at least 1", f.name)
			}
			*f.to = *f.from
		}
	}
	if env.Given("sleep") {
		noisy.Sleep = cfg.Sleep
	}
	switch {
	case noisy.Backlog < 1 || noisy.Cap < 1 || noisy.Rate < 1:
		return cli.Usagef("--backlog, --key-cap and --key-rate must be at least 1")
	case noisy.BacklogTurn < 1 || noisy.BacklogTurn > noisy.Backlog:
		return cli.Usagef("--backlog-turn must be from 1 to --backlog (%d), got %d", noisy.Backlog, noisy.BacklogTurn)
	case noisy.Interval <= 0 || noisy.Sleep < 0:
		return cli.Usagef("--b-interval must be positive and --sleep not negative")
	case noisy.CapCalls < 1:
		return cli.Usagef("--key-cap-calls must be at least 1, got %d", noisy.CapCalls)
	case noisy.RateFor <= time.Second:
		return cli.Usagef("--key-rate-for must be more than 1s (the served rate is measured from 1s on), got %v", noisy.RateFor)
	}
	noisy.Offered = 4 * float64(noisy.Rate)
	var err error
	noisy.Storage, err = parseStorage(b.storage)
	return err
}
