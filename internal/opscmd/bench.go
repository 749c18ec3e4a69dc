package opscmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/internal/cli"
)

// benchHelp is bench's help text.
const benchHelp = `Loads the pool through its whole path: simulated agents dispatch turns of
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
--b-interval; a per-key cap of --key-cap (--key-cap-calls calls of each
of two tenants); a per-key rate limit of --key-rate/s offered four times
as much for --key-rate-for; one tenant's --calls calls with the
scheduler off and on. It prints each figure next to its target.

--repeat F measures the result cache instead (issue 24), on an embedded
server with in-process workers: --calls calls (default 20000) of a
cacheable tool that sleeps --sleep, a share F of them repeating an
earlier call's input, sent by --concurrency agents (default 64) straight
to the dispatcher and then through the policy gate with the result
cache. It prints each phase's throughput, latency and the tool's
executions, counted by the tool.`

// Bench is "orchestrator bench": it loads the whole path (dispatch →
// TOOL_CALLS → worker → TOOL_RESULTS → dispatch) and a raw-JetStream
// baseline in the same run, and prints the pool's figures next to the
// baseline's; with --scenario noisy-neighbour, fair shares and per-key
// limits instead. Exit 0, 1 when the run failed, 2 on usage or connection
// errors.
func Bench() *cli.Command {
	b := &benchCmd{}
	return &cli.Command{
		Name:    "bench",
		Summary: "load the whole path, with a raw-JetStream baseline in the same run: orchestrator bench --calls 50000",
		Help:    benchHelp,
		Flags:   b.register,
		Run:     b.run,
	}
}

// benchCmd is "orchestrator bench": its flags and its run. The flags of
// the load (workers, calls, concurrency, sleep, storage) serve both
// scenarios; cfg holds the throughput scenario's, noisy the
// noisy-neighbour scenario's own.
type benchCmd struct {
	nats     cli.NATSFlags
	log      cli.LogFlags
	cfg      bench.Config
	noisy    bench.NoisyConfig
	cache    bench.CacheConfig
	fail     string
	fronts   string
	storage  string
	scenario string
	baseline bool
	asJSON   bool
	profiles profilePaths
}

// register adds bench's flags to fs.
func (b *benchCmd) register(fs *flag.FlagSet) {
	b.nats.Register(fs)
	b.log.Register(fs)
	fs.IntVar(&b.cfg.Workers, "workers", 1, "in-process workers; 0 with --nats-url leaves the pool's calls to worker processes started separately")
	fs.IntVar(&b.cfg.WorkerConcurrency, "worker-concurrency", bench.WorkerConcurrencyDefault, "calls each worker executes at once (the baseline runs as many executors)")
	fs.IntVar(&b.cfg.Calls, "calls", 0, fmt.Sprintf("calls measured per phase (default %d unless --duration is given)", bench.CallsDefault))
	fs.DurationVar(&b.cfg.Duration, "duration", 0, "measure each phase for this long instead of a number of calls")
	fs.IntVar(&b.cfg.Warmup, "warmup", 0, "calls run before each phase is measured (default calls/20, 200 to 2000; -1 for none)")
	fs.IntVar(&b.cfg.Concurrency, "concurrency", bench.ConcurrencyDefault, "simulated agents, each waiting for its turn's results (with --rate: turns in flight at most)")
	fs.Float64Var(&b.cfg.Rate, "rate", 0, "offered calls/s, open loop (default: closed loop, as fast as the agents go)")
	fs.IntVar(&b.cfg.Batch, "batch", 1, "tool calls per assistant turn")
	fs.StringVar(&b.cfg.Tool, "tool", bench.ToolEcho, "the tool loaded: echo or sleep")
	fs.DurationVar(&b.cfg.Sleep, "sleep", bench.SleepDefault, "how long each sleep call sleeps (--tool sleep)")
	fs.IntVar(&b.cfg.Payload, "payload", bench.PayloadDefault, "bytes of each echo call's input JSON")
	fs.StringVar(&b.fronts, "front", bench.FrontDirect, "front doors to load, comma-separated: direct (Orchestrator.Dispatch in the process; always measured), http (the HTTP API through pkg/client), mcp (a host's JSON-RPC requests on /mcp over keep-alive HTTP, written by hand: the server's cost), mcp-sdk (the go-sdk MCP client on /mcp, streamable HTTP); each a phase against the same pool")
	fs.StringVar(&b.fail, "fail", "", "share of calls sent to flaky to fail, e.g. transient=0.2,permanent=0.05 (transient: 503 once, then success; permanent: 404)")
	fs.DurationVar(&b.cfg.TransientBaseDelay, "transient-delay", bench.TransientBaseDelayDefault, "flaky's retry base delay in the bench")
	fs.BoolVar(&b.baseline, "baseline", true, "also run the raw-JetStream baseline and print ratios")
	fs.IntVar(&b.cfg.Rounds, "rounds", 1, "repeat the phases and report medians")
	fs.StringVar(&b.storage, "storage", "file", "embedded server: stream storage, file or memory")
	fs.DurationVar(&b.cfg.TurnTimeout, "turn-timeout", bench.TurnTimeoutDefault, "how long a turn waits for its results")
	fs.BoolVar(&b.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&b.scenario, "scenario", bench.ScenarioThroughput, "what to measure: throughput (the pool against raw JetStream) or noisy-neighbour (fair shares and per-key limits)")
	b.registerNoisy(fs)
	fs.Float64Var(&b.cache.Repeat, "repeat", 0, "measure the result cache instead: the share of calls (e.g. 0.8) whose input repeats an earlier one; the same calls of a cacheable tool (sleeping --sleep) run without the cache and with it, and the report gives throughput and the tool's executions of each")
	b.profiles.register(fs)
	// The bench's own default: warnings only, so per-call logs of
	// retried calls do not flood the terminal.
	if err := fs.Set("log-level", "warn"); err != nil {
		panic(err)
	}
	fs.Lookup("log-level").DefValue = "warn"
}

// registerNoisy adds the flags of the noisy-neighbour scenario only.
func (b *benchCmd) registerNoisy(fs *flag.FlagSet) {
	fs.IntVar(&b.noisy.Backlog, "backlog", bench.NoisyBacklogDefault, "noisy-neighbour: calls tenant A queues at once")
	fs.IntVar(&b.noisy.BacklogTurn, "backlog-turn", 1, "noisy-neighbour: tool calls per turn of A's backlog (1: one agent per call; 20: agents whose turns fan out 20 calls)")
	fs.DurationVar(&b.noisy.Interval, "b-interval", bench.NoisyIntervalDefault, "noisy-neighbour: tenant B sends one call this often")
	fs.IntVar(&b.noisy.Cap, "key-cap", bench.NoisyCapDefault, "noisy-neighbour: the per-key concurrency cap of the cap phase")
	fs.IntVar(&b.noisy.CapCalls, "key-cap-calls", bench.NoisyCapCallsDefault, "noisy-neighbour: the calls each of the two tenants of the cap phase queues")
	fs.IntVar(&b.noisy.Rate, "key-rate", bench.NoisyRateDefault, "noisy-neighbour: the per-key rate limit (calls/s) of the rate phase; the key offers four times as much")
	fs.DurationVar(&b.noisy.RateFor, "key-rate-for", bench.NoisyRateForDefault, "noisy-neighbour: how long the rate phase offers calls (more than 1s: the served rate is measured from 1s on)")
}

// run runs the scenario --scenario names.
func (b *benchCmd) run(ctx context.Context, env *cli.Env, _ []string) error {
	if env.Given("repeat") {
		return b.runCache(ctx, env)
	}
	switch b.scenario {
	case bench.ScenarioThroughput:
		return b.runThroughput(ctx, env)
	case bench.ScenarioNoisyNeighbour:
		return b.runNoisy(ctx, env)
	default:
		return cli.Usagef("--scenario %q: want %s or %s", b.scenario, bench.ScenarioThroughput, bench.ScenarioNoisyNeighbour)
	}
}

// writeReport prints a bench report as a table, or with --json as JSON.
func (b *benchCmd) writeReport(env *cli.Env, rep interface {
	WriteJSON(io.Writer) error
	WriteText(io.Writer) error
}) error {
	if b.asJSON {
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
