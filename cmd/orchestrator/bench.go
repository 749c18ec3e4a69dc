package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/progress"
)

// benchCommand is "orchestrator bench": it loads the whole path (dispatch
// → TOOL_CALLS → worker → TOOL_RESULTS → dispatch) and a raw-JetStream
// baseline in the same run, and prints the pool's figures next to the
// baseline's. Exit 0, 1 when the run failed, 2 on usage or connection
// errors.
func benchCommand() *cli.Command {
	var (
		natsFlags                                          cli.NATSFlags
		logFlags                                           cli.LogFlags
		cfg                                                bench.Config
		fail, storage, cpuProfile, baseProfile, memProfile string
		httpProfile, mcpProfile                            string
		fronts, scenario                                   string
		baseline, asJSON                                   bool
		noisy                                              bench.NoisyConfig
	)
	return &cli.Command{
		Name:    "bench",
		Summary: "load the whole path, with a raw-JetStream baseline in the same run: orchestrator bench --calls 50000",
		Help: `Loads the pool through its whole path: simulated agents dispatch turns of
tool calls, in-process workers (or external ones) run them, the results
come back. In the same run, against the same server, a raw-JetStream
baseline (nats.go only) carries messages of the same sizes over streams
with the same settings; the pool's figures are printed as ratios of it.
Without --nats-url an embedded server with file storage in a temporary
directory is used.

--scenario noisy-neighbour measures fair shares and per-key limits
instead (issue 15), on an embedded server with in-process workers (2 × 32
slots unless --workers and --worker-concurrency say otherwise) and a
sleep tool of 20ms unless --sleep is given: tenant A queues --backlog
calls at once (in turns of --backlog-turn calls), alone and then with tenant B sending one call every
--b-interval; a per-key cap of --key-cap; a per-key rate limit of
--key-rate/s offered four times as much; one tenant's --calls calls with
the scheduler off and on. It prints each figure next to its target.`,
		Flags: func(fs *flag.FlagSet) {
			natsFlags.Register(fs)
			logFlags.Register(fs)
			fs.IntVar(&cfg.Workers, "workers", 1, "in-process workers; 0 with --nats-url leaves the pool's calls to worker processes started separately")
			fs.IntVar(&cfg.WorkerConcurrency, "worker-concurrency", bench.WorkerConcurrencyDefault, "calls each worker executes at once (the baseline runs as many executors)")
			fs.IntVar(&cfg.Calls, "calls", 0, fmt.Sprintf("calls measured per phase (default %d unless --duration is given)", bench.CallsDefault))
			fs.DurationVar(&cfg.Duration, "duration", 0, "measure each phase for this long instead of a number of calls")
			fs.IntVar(&cfg.Warmup, "warmup", 0, "calls run before each phase is measured (default calls/20, 200 to 2000; -1 for none)")
			fs.IntVar(&cfg.Concurrency, "concurrency", bench.ConcurrencyDefault, "simulated agents, each waiting for its turn's results (with --rate: turns in flight at most)")
			fs.Float64Var(&cfg.Rate, "rate", 0, "offered calls/s, open loop (default: closed loop, as fast as the agents go)")
			fs.IntVar(&cfg.Batch, "batch", 1, "tool calls per assistant turn")
			fs.StringVar(&cfg.Tool, "tool", bench.ToolEcho, "the tool loaded: echo or sleep")
			fs.DurationVar(&cfg.Sleep, "sleep", bench.SleepDefault, "how long each sleep call sleeps (--tool sleep)")
			fs.IntVar(&cfg.Payload, "payload", bench.PayloadDefault, "bytes of each echo call's input JSON")
			fs.StringVar(&fronts, "front", bench.FrontDirect, "front doors to load, comma-separated: direct (Orchestrator.Dispatch in the process; always measured), http (the HTTP API through pkg/client), mcp (a go-sdk MCP client on /mcp, streamable HTTP); each a phase against the same pool")
			fs.StringVar(&fail, "fail", "", "share of calls sent to flaky to fail, e.g. transient=0.2,permanent=0.05 (transient: 503 once, then success; permanent: 404)")
			fs.DurationVar(&cfg.TransientBaseDelay, "transient-delay", bench.TransientBaseDelayDefault, "flaky's retry base delay in the bench")
			fs.BoolVar(&baseline, "baseline", true, "also run the raw-JetStream baseline and print ratios")
			fs.IntVar(&cfg.Rounds, "rounds", 1, "repeat the phases and report medians")
			fs.StringVar(&storage, "storage", "file", "embedded server: stream storage, file or memory")
			fs.DurationVar(&cfg.TurnTimeout, "turn-timeout", bench.TurnTimeoutDefault, "how long a turn waits for its results")
			fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
			fs.StringVar(&scenario, "scenario", bench.ScenarioThroughput, "what to measure: throughput (the pool against raw JetStream) or noisy-neighbour (fair shares and per-key limits)")
			fs.IntVar(&noisy.Backlog, "backlog", bench.NoisyBacklogDefault, "noisy-neighbour: calls tenant A queues at once")
			fs.IntVar(&noisy.BacklogTurn, "backlog-turn", 1, "noisy-neighbour: tool calls per turn of A's backlog (1: one agent per call; 20: agents whose turns fan out 20 calls)")
			fs.DurationVar(&noisy.Interval, "b-interval", bench.NoisyIntervalDefault, "noisy-neighbour: tenant B sends one call this often")
			fs.IntVar(&noisy.Cap, "key-cap", bench.NoisyCapDefault, "noisy-neighbour: the per-key concurrency cap of the cap phase")
			fs.IntVar(&noisy.Rate, "key-rate", bench.NoisyRateDefault, "noisy-neighbour: the per-key rate limit (calls/s) of the rate phase; the key offers four times as much")
			fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the measured pool phase to this file")
			fs.StringVar(&httpProfile, "http-cpuprofile", "", "write a CPU profile of the measured HTTP API front phase (--front http) to this file")
			fs.StringVar(&mcpProfile, "mcp-cpuprofile", "", "write a CPU profile of the measured MCP front phase (--front mcp) to this file")
			fs.StringVar(&baseProfile, "baseline-cpuprofile", "", "write a CPU profile of the measured baseline phase to this file")
			fs.StringVar(&memProfile, "memprofile", "", "write the allocation profile of the whole run to this file at the end")
			// The bench's own default: warnings only, so per-call logs of
			// retried calls do not flood the terminal.
			if err := fs.Set("log-level", "warn"); err != nil {
				panic(err)
			}
			fs.Lookup("log-level").DefValue = "warn"
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			switch scenario {
			case bench.ScenarioThroughput:
			case bench.ScenarioNoisyNeighbour:
				return runNoisyBench(ctx, env, noisy, cfg, storage, asJSON, &logFlags)
			default:
				return cli.Usagef("--scenario %q: want %s or %s", scenario, bench.ScenarioThroughput, bench.ScenarioNoisyNeighbour)
			}
			for _, name := range noisyOnlyFlags {
				if env.Given(name) {
					return cli.Usagef("--%s applies to --scenario %s only", name, bench.ScenarioNoisyNeighbour)
				}
			}
			var err error
			if cfg.Fail, err = bench.ParseFailMix(fail); err != nil {
				return cli.Usagef("--fail %s", err)
			}
			if cfg.Fronts, err = bench.ParseFronts(fronts); err != nil {
				return cli.Usagef("--front %s", err)
			}
			cfg.SkipBaseline = !baseline
			cfg.NATSURL = natsFlags.URL()
			switch {
			case cfg.Workers < 0:
				return cli.Usagef("--workers must not be negative")
			case cfg.Workers == 0 && cfg.NATSURL == "":
				return cli.Usagef("--workers 0 needs --nats-url: external workers must join a server this command does not start")
			case cfg.Workers == 0:
				cfg.ExternalWorkers = true
			}
			if cfg.Storage, err = parseStorage(storage); err != nil {
				return err
			}
			if cfg.Calls < 0 || cfg.Duration < 0 || cfg.Concurrency < 1 || cfg.WorkerConcurrency < 1 || cfg.Batch < 1 || cfg.Rounds < 1 || cfg.Rate < 0 {
				return cli.Usagef("--calls, --duration and --rate must not be negative; --concurrency, --worker-concurrency, --batch and --rounds must be at least 1")
			}
			if cfg.Calls > 0 && cfg.Duration > 0 {
				return cli.Usagef("give --calls or --duration, not both")
			}
			log, err := logFlags.Logger(env.Stderr)
			if err != nil {
				return err
			}
			cfg.Logger = log
			cfg.Connect = func(url, name string) (*nats.Conn, error) { return natsFlags.Connect(url, name, log) }
			cfg.Progress = progress.Terminal(env.Stderr)
			var httpW, mcpW io.Writer
			for _, p := range []struct {
				path string
				dst  *io.Writer
			}{{cpuProfile, &cfg.CPUProfile}, {baseProfile, &cfg.BaselineCPUProfile}, {memProfile, &cfg.MemProfile},
				{httpProfile, &httpW}, {mcpProfile, &mcpW}} {
				if p.path == "" {
					continue
				}
				f, err := os.Create(p.path)
				if err != nil {
					return cli.Usagef("%v", err)
				}
				defer f.Close()
				*p.dst = f
			}

			cfg.FrontCPUProfiles = map[string]io.Writer{}
			for front, w := range map[string]io.Writer{bench.FrontHTTP: httpW, bench.FrontMCP: mcpW} {
				if w != nil {
					cfg.FrontCPUProfiles[front] = w
				}
			}
			rep, err := bench.Run(ctx, cfg)
			if err != nil {
				return err
			}
			return writeBenchReport(env, rep, asJSON)
		},
	}
}

// The flags of the noisy-neighbour scenario only, and those of the
// throughput scenario that it does not take.
var (
	noisyOnlyFlags  = []string{"backlog", "backlog-turn", "b-interval", "key-cap", "key-rate"}
	noisyNoneOfThem = []string{
		"nats-url", "duration", "warmup", "rate", "batch", "tool", "payload", "front", "fail", "transient-delay",
		"baseline", "rounds", "turn-timeout", "cpuprofile", "http-cpuprofile", "mcp-cpuprofile", "baseline-cpuprofile", "memprofile",
	}
)

// runNoisyBench is "orchestrator bench --scenario noisy-neighbour": the
// flags it shares with the throughput scenario (workers, worker
// concurrency, sleep, calls, concurrency, storage) keep the scenario's
// own defaults unless given.
func runNoisyBench(ctx context.Context, env *cli.Env, noisy bench.NoisyConfig, cfg bench.Config, storage string, asJSON bool, logFlags *cli.LogFlags) error {
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
	}
	noisy.Offered = 4 * float64(noisy.Rate)
	var err error
	if noisy.Storage, err = parseStorage(storage); err != nil {
		return err
	}
	log, err := logFlags.Logger(env.Stderr)
	if err != nil {
		return err
	}
	noisy.Logger = log
	noisy.Progress = progress.Terminal(env.Stderr)
	rep, err := bench.RunNoisyNeighbour(ctx, noisy)
	if err != nil {
		return err
	}
	return writeBenchReport(env, rep, asJSON)
}

// writeBenchReport prints a bench report as a table, or as JSON.
func writeBenchReport(env *cli.Env, rep interface {
	WriteJSON(io.Writer) error
	WriteText(io.Writer) error
}, asJSON bool) error {
	if asJSON {
		return rep.WriteJSON(env.Stdout)
	}
	return rep.WriteText(env.Stdout)
}

// parseStorage reads --storage.
func parseStorage(s string) (js.StorageType, error) {
	switch strings.ToLower(s) {
	case "file":
		return js.FileStorage, nil
	case "memory":
		return js.MemoryStorage, nil
	}
	return js.FileStorage, cli.Usagef("--storage %q: want file or memory", s)
}
