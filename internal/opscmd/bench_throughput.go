package opscmd

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/progress"
)

// runThroughput is "orchestrator bench" (--scenario throughput): the pool
// against the raw-JetStream baseline.
func (b *benchCmd) runThroughput(ctx context.Context, env *cli.Env) error {
	for _, name := range noisyOnlyFlags {
		if env.Given(name) {
			return cli.Usagef("--%s applies to --scenario %s only", name, bench.ScenarioNoisyNeighbour)
		}
	}
	if err := b.throughputConfig(); err != nil {
		return err
	}
	log, err := b.log.Logger(env.Stderr)
	if err != nil {
		return err
	}
	b.cfg.Logger = log
	// Spans of the pool phase when the OTEL_* environment asks for them
	// (what tracing costs), exported before the report is written.
	sd := &cli.Shutdown{Role: "bench", Logger: log}
	defer sd.Stop()
	tp, err := cli.Tracing(ctx, sd, "toolpool-bench", log)
	if err != nil {
		return err
	}
	b.cfg.Tracer = tp.Tracer()
	b.cfg.Connect = func(url, name string) (*nats.Conn, error) { return b.nats.Connect(url, name, log) }
	b.cfg.Progress = progress.Terminal(env.Stderr)
	closeProfiles, err := b.profiles.open(&b.cfg)
	if err != nil {
		return err
	}
	defer closeProfiles()
	rep, err := bench.Run(ctx, b.cfg)
	if err != nil {
		return err
	}
	return b.writeReport(env, rep)
}

// throughputConfig completes cfg from the flags that are not its fields
// and checks it; its errors are usage errors naming the flag.
func (b *benchCmd) throughputConfig() error {
	cfg := &b.cfg
	var err error
	if cfg.Fail, err = bench.ParseFailMix(b.fail); err != nil {
		return cli.Usagef("--fail %s", err)
	}
	if cfg.Fronts, err = bench.ParseFronts(b.fronts); err != nil {
		return cli.Usagef("--front %s", err)
	}
	cfg.SkipBaseline = !b.baseline
	cfg.NATSURL = b.nats.URL()
	switch {
	case cfg.Workers < 0:
		return cli.Usagef("--workers must not be negative")
	case cfg.Workers == 0 && cfg.NATSURL == "":
		return cli.Usagef("--workers 0 needs --nats-url: external workers must join a server this command does not start")
	case cfg.Workers == 0:
		cfg.ExternalWorkers = true
	}
	if cfg.Storage, err = parseStorage(b.storage); err != nil {
		return err
	}
	if cfg.Calls < 0 || cfg.Duration < 0 || cfg.Concurrency < 1 || cfg.WorkerConcurrency < 1 || cfg.Batch < 1 || cfg.Rounds < 1 || cfg.Rate < 0 {
		return cli.Usagef("--calls, --duration and --rate must not be negative; --concurrency, --worker-concurrency, --batch and --rounds must be at least 1")
	}
	if cfg.Calls > 0 && cfg.Duration > 0 {
		return cli.Usagef("give --calls or --duration, not both")
	}
	return nil
}

// profilePaths are the files the profiling flags name; "" for none.
type profilePaths struct {
	pool, baseline, http, mcp, mcpSDK, mem string
}

// register adds the profiling flags to fs.
func (p *profilePaths) register(fs *flag.FlagSet) {
	fs.StringVar(&p.pool, "cpuprofile", "", "write a CPU profile of the measured pool phase to this file")
	fs.StringVar(&p.http, "http-cpuprofile", "", "write a CPU profile of the measured HTTP API front phase (--front http) to this file")
	fs.StringVar(&p.mcp, "mcp-cpuprofile", "", "write a CPU profile of the measured MCP front phase of the lean load generator (--front mcp) to this file")
	fs.StringVar(&p.mcpSDK, "mcp-sdk-cpuprofile", "", "write a CPU profile of the measured MCP front phase of the go-sdk client (--front mcp-sdk) to this file")
	fs.StringVar(&p.baseline, "baseline-cpuprofile", "", "write a CPU profile of the measured baseline phase to this file")
	fs.StringVar(&p.mem, "memprofile", "", "write the allocation profile of the whole run to this file at the end")
}

// open creates the profiles' files and sets them in cfg; closeAll closes
// them, after the report is written. A file that cannot be created is a
// usage error.
func (p *profilePaths) open(cfg *bench.Config) (closeAll func(), err error) {
	var files []*os.File
	closeAll = func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	var httpW, mcpW, mcpSDKW io.Writer
	for _, x := range []struct {
		path string
		dst  *io.Writer
	}{{p.pool, &cfg.CPUProfile}, {p.baseline, &cfg.BaselineCPUProfile}, {p.mem, &cfg.MemProfile}, {p.http, &httpW}, {p.mcp, &mcpW}, {p.mcpSDK, &mcpSDKW}} {
		if x.path == "" {
			continue
		}
		f, err := os.Create(x.path)
		if err != nil {
			closeAll()
			return nil, cli.Usagef("%v", err)
		}
		files = append(files, f)
		*x.dst = f
	}
	cfg.FrontCPUProfiles = map[string]io.Writer{}
	for front, w := range map[string]io.Writer{bench.FrontHTTP: httpW, bench.FrontMCP: mcpW, bench.FrontMCPSDK: mcpSDKW} {
		if w != nil {
			cfg.FrontCPUProfiles[front] = w
		}
	}
	return closeAll, nil
}
