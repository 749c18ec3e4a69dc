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
		fronts                                             string
		baseline, asJSON                                   bool
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
directory is used.`,
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
			switch strings.ToLower(storage) {
			case "file":
				cfg.Storage = js.FileStorage
			case "memory":
				cfg.Storage = js.MemoryStorage
			default:
				return cli.Usagef("--storage %q: want file or memory", storage)
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
			if asJSON {
				return rep.WriteJSON(env.Stdout)
			}
			return rep.WriteText(env.Stdout)
		},
	}
}
