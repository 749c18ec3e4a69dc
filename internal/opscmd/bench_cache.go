package opscmd

import (
	"context"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/progress"
)

// The flags of the throughput scenario that --repeat does not take.
var cacheNoneOfThem = []string{
	"nats-url", "duration", "warmup", "rate", "batch", "tool", "payload", "front", "fail", "transient-delay",
	"baseline", "rounds", "cpuprofile", "http-cpuprofile", "mcp-cpuprofile", "mcp-sdk-cpuprofile", "baseline-cpuprofile", "memprofile",
}

// runCache is "orchestrator bench --repeat F": the same calls without the
// result cache and with it.
func (b *benchCmd) runCache(ctx context.Context, env *cli.Env) error {
	if err := b.cacheConfig(env); err != nil {
		return err
	}
	log, err := b.log.Logger(env.Stderr)
	if err != nil {
		return err
	}
	b.cache.Logger = log
	b.cache.Progress = progress.Terminal(env.Stderr)
	rep, err := bench.RunCache(ctx, b.cache)
	if err != nil {
		return err
	}
	return b.writeReport(env, rep)
}

// cacheConfig completes cache from the flags it shares with the
// throughput scenario (workers, worker concurrency, calls, concurrency,
// sleep, storage, turn timeout): they keep the scenario's own defaults
// unless given. Its errors are usage errors naming the flag.
func (b *benchCmd) cacheConfig(env *cli.Env) error {
	c, cfg := &b.cache, &b.cfg
	if !(c.Repeat > 0 && c.Repeat <= 1) {
		return cli.Usagef("--repeat %v: want the share of calls that repeat an earlier input, above 0 and at most 1, e.g. 0.8", c.Repeat)
	}
	if b.scenario != bench.ScenarioThroughput {
		return cli.Usagef("--repeat does not apply to --scenario %s", b.scenario)
	}
	for _, name := range append(cacheNoneOfThem, noisyOnlyFlags...) {
		if env.Given(name) {
			return cli.Usagef("--%s does not apply with --repeat", name)
		}
	}
	for _, f := range []struct {
		name     string
		from, to *int
	}{
		{"workers", &cfg.Workers, &c.Workers}, {"worker-concurrency", &cfg.WorkerConcurrency, &c.WorkerConcurrency},
		{"calls", &cfg.Calls, &c.Calls}, {"concurrency", &cfg.Concurrency, &c.Concurrency},
	} {
		if env.Given(f.name) {
			if *f.from < 1 {
				return cli.Usagef("--%s must be at least 1", f.name)
			}
			*f.to = *f.from
		}
	}
	if env.Given("sleep") {
		if cfg.Sleep < 0 {
			return cli.Usagef("--sleep must not be negative")
		}
		c.Sleep = cfg.Sleep
	}
	if env.Given("turn-timeout") {
		if cfg.TurnTimeout <= 0 {
			return cli.Usagef("--turn-timeout must be positive")
		}
		c.Timeout = cfg.TurnTimeout
	}
	var err error
	c.Storage, err = parseStorage(b.storage)
	return err
}
