package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/internal/cli"
)

// benchCmd loads the whole path (dispatch → TOOL_CALLS → worker →
// TOOL_RESULTS → dispatch) and a raw-JetStream baseline in the same run,
// and prints the pool's figures next to the baseline's. Exit 0, 1 when
// the run failed, 2 on usage or connection errors.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orchestrator bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: orchestrator bench [flags]

Loads the pool through its whole path: simulated agents dispatch turns of
tool calls, in-process workers (or external ones) run them, the results
come back. In the same run, against the same server, a raw-JetStream
baseline (nats.go only) carries messages of the same sizes over streams
with the same settings; the pool's figures are printed as ratios of it.
Without --nats-url an embedded server with file storage in a temporary
directory is used.

flags:`)
		fs.PrintDefaults()
	}
	var natsFlags cli.NATSFlags
	natsFlags.Register(fs)
	var logFlags cli.LogFlags
	logFlags.Register(fs)
	var cfg bench.Config
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
	fail := fs.String("fail", "", "share of calls sent to flaky to fail, e.g. transient=0.2,permanent=0.05 (transient: 503 once, then success; permanent: 404)")
	fs.DurationVar(&cfg.TransientBaseDelay, "transient-delay", bench.TransientBaseDelayDefault, "flaky's retry base delay in the bench")
	baseline := fs.Bool("baseline", true, "also run the raw-JetStream baseline and print ratios")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "repeat the phases and report medians")
	storage := fs.String("storage", "file", "embedded server: stream storage, file or memory")
	fs.DurationVar(&cfg.TurnTimeout, "turn-timeout", bench.TurnTimeoutDefault, "how long a turn waits for its results")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured pool phase to this file")
	baseProfile := fs.String("baseline-cpuprofile", "", "write a CPU profile of the measured baseline phase to this file")
	memProfile := fs.String("memprofile", "", "write the allocation profile of the whole run to this file at the end")
	// The bench's own default: warnings only, so per-call logs of retried
	// calls do not flood the terminal.
	if err := fs.Set("log-level", "warn"); err != nil {
		panic(err)
	}
	fs.Lookup("log-level").DefValue = "warn"
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "orchestrator bench: "+format+"\n", a...)
		return cli.ExitUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.Fail, err = bench.ParseFailMix(*fail); err != nil {
		return usageErr("--fail %s", err)
	}
	cfg.SkipBaseline = !*baseline
	cfg.NATSURL = natsFlags.URL()
	switch {
	case cfg.Workers < 0:
		return usageErr("--workers must not be negative")
	case cfg.Workers == 0 && cfg.NATSURL == "":
		return usageErr("--workers 0 needs --nats-url: external workers must join a server this command does not start")
	case cfg.Workers == 0:
		cfg.ExternalWorkers = true
	}
	switch strings.ToLower(*storage) {
	case "file":
		cfg.Storage = js.FileStorage
	case "memory":
		cfg.Storage = js.MemoryStorage
	default:
		return usageErr("--storage %q: want file or memory", *storage)
	}
	if cfg.Calls < 0 || cfg.Duration < 0 || cfg.Concurrency < 1 || cfg.WorkerConcurrency < 1 || cfg.Batch < 1 || cfg.Rounds < 1 || cfg.Rate < 0 {
		return usageErr("--calls, --duration and --rate must not be negative; --concurrency, --worker-concurrency, --batch and --rounds must be at least 1")
	}
	if cfg.Calls > 0 && cfg.Duration > 0 {
		return usageErr("give --calls or --duration, not both")
	}
	log, err := logFlags.Logger(stderr)
	if err != nil {
		return usageErr("%v", err)
	}
	cfg.Logger = log
	cfg.Connect = func(url, name string) (*nats.Conn, error) { return natsFlags.Connect(url, name, log) }
	if f, ok := stderr.(*os.File); ok && benchTerminal(f) {
		cfg.Progress = stderr
	}
	for _, p := range []struct {
		path string
		dst  *io.Writer
	}{{*cpuProfile, &cfg.CPUProfile}, {*baseProfile, &cfg.BaselineCPUProfile}, {*memProfile, &cfg.MemProfile}} {
		if p.path == "" {
			continue
		}
		f, err := os.Create(p.path)
		if err != nil {
			return usageErr("%v", err)
		}
		defer f.Close()
		*p.dst = f
	}

	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator bench:", err)
		return cli.ExitIsError
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator bench:", err)
		return cli.ExitIsError
	}
	return cli.ExitOK
}

// benchTerminal reports whether f is a terminal (a character device).
func benchTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
