package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// workersEmbeddedDefault is --workers with the embedded server.
const workersEmbeddedDefault = 4

// serveFlags are serve's flags.
type serveFlags struct {
	nats         cli.NATSFlags
	log          cli.LogFlags
	dataDir      string
	natsListen   string
	httpAddr     string
	builtin      cli.BuiltinFlags
	catalog      cli.CatalogFlags
	instance     string
	workers      int
	concurrency  int
	demoTools    bool
	replicas     int
	drainTimeout time.Duration
	attemptsTTL  time.Duration
	retryFor     time.Duration
	front        httpFlags
	// ready, when set, runs once the pool is up, in place of waiting for
	// ctx (orchestrator run uses it); the pool shuts down when it returns.
	ready func(ctx context.Context, orch *toolpool.Orchestrator)
}

// serveHelp is serve's help text.
const serveHelp = `Runs the pool. With no --nats-url (or NATS_URL) it starts an embedded JetStream
server, provisions the streams and runs --workers in-process workers.`

// serveCommand is "orchestrator serve", the default command: the pool
// until SIGTERM. Exit 0 after a clean shutdown, 1 when the pool failed (or
// its NATS connection closed for good), 2 on bad flags.
func serveCommand() *cli.Command {
	f := &serveFlags{}
	return &cli.Command{
		Name:    "serve",
		Summary: "(the default) run the pool: an embedded JetStream server unless\n--nats-url is given, in-process workers, and the HTTP API",
		Help:    serveHelp,
		Flags:   f.register,
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			if err := f.check(env.Given); err != nil {
				return err
			}
			log, err := f.log.Logger(env.Stderr)
			if err != nil {
				return err
			}
			if err := runServe(ctx, f, log); err != nil {
				log.Error("orchestrator stopped", "err", err)
				return cli.Exit(cli.ExitIsError)
			}
			return nil
		},
	}
}

// parseServe parses serve's arguments (for tests).
func parseServe(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("orchestrator serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if err := f.check(func(name string) bool { return given[name] }); err != nil {
		return nil, err
	}
	return f, nil
}

// register adds the flags that set up a pool to fs: serve's, and run's
// before its own.
func (f *serveFlags) register(fs *flag.FlagSet) {
	f.nats.Register(fs)
	f.log.Register(fs)
	fs.StringVar(&f.dataDir, "data-dir", "data", "embedded server: where JetStream keeps its store")
	fs.StringVar(&f.natsListen, "nats-listen", embedded.ListenDefault, "embedded server: client address, so separate worker processes can join")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "HTTP address (agent API, /metrics, /healthz, /readyz); empty to disable")
	f.builtin.Register(fs, cli.BuiltinAll)
	f.catalog.Register(fs)
	fs.StringVar(&f.instance, "instance", "", "this orchestrator's id in result subjects (default random)")
	// Mode-dependent defaults: the flags' own defaults are zero (which flag
	// does not print) and the usage says what applies; set by check.
	fs.IntVar(&f.workers, "workers", 0, "in-process workers (default 4 with the embedded server, 0 with --nats-url)")
	fs.IntVar(&f.concurrency, "concurrency", worker.ConcurrencyDefault, "calls each in-process worker executes at once")
	fs.BoolVar(&f.demoTools, "demo-tools", false, "serve the diagnostic tools echo, sleep and flaky (default on with the embedded server, off with --nats-url)")
	fs.IntVar(&f.replicas, "replicas", 1, "stream replicas (3 on a cluster)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", worker.DrainTimeoutDefault, "on SIGTERM, how long in-flight calls may finish")
	fs.DurationVar(&f.retryFor, "publish-retry-for", dispatch.PublishRetryForDefault, "how long a call JetStream did not acknowledge (e.g. during a leader election) is published again before the agent gets a 503; negative: at once")
	fs.DurationVar(&f.attemptsTTL, "attempts-ttl", settle.HistoryTTLDefault, "how long the toolpool_attempts bucket keeps a call's failed attempts (fixed when the bucket is created)")
	f.front.register(fs)
}

// oneOff changes the defaults of the pool's flags in fs for a pool one
// command starts for itself (run, mcp): no HTTP server, an embedded server
// on a free port with a temporary store (useTempDataDir), quiet logs, so it
// does not clash with a serve already running.
func oneOff(fs *flag.FlagSet) {
	for name, def := range map[string]string{"http": "", "data-dir": "", "nats-listen": "127.0.0.1:0", "log-level": "warn"} {
		fl := fs.Lookup(name)
		fl.DefValue = def
		_ = fl.Value.Set(def)
	}
	fs.Lookup("data-dir").Usage = "embedded server: where JetStream keeps its store (default a temporary directory, removed at exit)"
}

// useTempDataDir gives an embedded server without --data-dir a temporary
// store; remove deletes it.
func (f *serveFlags) useTempDataDir(prefix string) (remove func(), err error) {
	if f.dataDir != "" || f.nats.URL() != "" {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	f.dataDir = dir
	return func() { _ = os.RemoveAll(dir) }, nil
}

// check sets the mode-dependent defaults of the flags not given and
// validates them all; its errors name the flag.
func (f *serveFlags) check(given func(name string) bool) error {
	if f.nats.URL() == "" {
		if !given("workers") {
			f.workers = workersEmbeddedDefault
		}
		if !given("demo-tools") {
			f.demoTools = true
		}
	}
	if f.instance != "" {
		if err := jetstream.CheckToken("--instance", f.instance); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	if f.workers < 0 {
		return cli.Usagef("--workers must not be negative")
	}
	if f.catalog.Path != "" && f.workers == 0 {
		return cli.Usagef("--tools needs in-process workers (--workers N); or give the catalog to separate worker processes")
	}
	f.catalog.Replicas = f.replicas
	if f.concurrency < 1 {
		return cli.Usagef("--concurrency must be at least 1")
	}
	return f.front.check(f.httpAddr)
}

// runServe runs the pool until ctx is done: the embedded server unless
// --nats-url names one, the streams, the in-process workers, the
// orchestrator and the HTTP server, stopped in the reverse order.
func runServe(ctx context.Context, f *serveFlags, log *slog.Logger) error {
	url := f.nats.URL()
	if url == "" {
		emb, err := toolpool.NewEmbedded(toolpool.EmbeddedConfig{Listen: f.natsListen, DataDir: f.dataDir, Logger: log})
		if err == nil {
			err = emb.Start(ctx)
		}
		if err != nil {
			return err
		}
		defer emb.Stop(context.Background())
		url = emb.URL()
		log.Info("embedded JetStream server started", "url", url, "data_dir", f.dataDir)
	}
	nc, err := f.nats.Connect(url, "toolpool-orchestrator", log)
	if err != nil {
		return err
	}
	defer cli.DrainConn(nc, 5*time.Second) // flushes what the workers publish last
	drainCtx := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(context.Background(), d)
		_ = cancel // released when the timer fires: the process ends soon after
		return c
	}

	reg := metrics.NewRegistry()
	history := settle.HistoryConfig{TTL: f.attemptsTTL, Replicas: f.replicas}
	var srv *toolpool.Server
	if f.workers > 0 {
		mcpMetrics, err := metrics.NewMCP(reg)
		if err != nil {
			return err
		}
		f.catalog.Logger, f.catalog.MCPMetrics = log, mcpMetrics
		tools, closeTools, err := cli.Registry(f.demoTools, demo.Options{}, &f.catalog, &f.builtin)
		if err != nil {
			return err
		}
		defer closeTools.Close()
		if len(tools.Names()) > 0 {
			srv, err = toolpool.NewServer(toolpool.ServerConfig{
				Conn: nc, Registry: tools, Workers: f.workers,
				Worker:  worker.Config{Concurrency: f.concurrency, DrainTimeout: f.drainTimeout},
				History: history, Discovery: f.catalog.Bucket(), Metrics: reg, Logger: log,
			})
			if err != nil {
				return err
			}
			f.catalog.FollowMCP(srv, log)
		}
	}
	if err := toolpool.Provision(ctx, nc, toolpool.StreamsConfig{Replicas: f.replicas}); err != nil {
		return err
	}
	if srv != nil { // first: the orchestrator's catalog then sees its tools at once
		if err := srv.Start(ctx); err != nil {
			return err
		}
		defer srv.Stop(drainCtx(f.drainTimeout)) // on a failed start-up; idempotent
	}
	ocfg := toolpool.OrchestratorConfig{
		Conn: nc, Replicas: f.replicas,
		Dispatch: dispatch.Config{
			Instance: f.instance, PublishRetryFor: f.retryFor,
			MaxCallsInFlight: f.front.maxInFlight, MaxQueueDepth: f.front.maxQueueDepth,
			NoQueueWaitAdmission: !f.front.byQueueWait,
			NoFairness:           !f.front.fairness,
		},
		Discovery: f.catalog.Bucket(), History: history, API: f.front.apiConfig(), MCP: f.front.mcpConfig(f.httpAddr), Metrics: reg, Logger: log,
	}
	if f.httpAddr != "" {
		ocfg.Console = f.front.consoleConfig(f.httpAddr)
	}
	if srv != nil {
		// The MCP servers' status is a detail: the orchestrator serves
		// its other tools while one is down (and retried).
		ocfg.Checks = append(srv.Checks(), health.AsDetails(f.catalog.Checks()...)...)
	}
	orch, err := toolpool.NewOrchestrator(ocfg)
	if err == nil {
		err = orch.Start(ctx)
	}
	if err != nil {
		return err
	}
	defer orch.Stop(drainCtx(time.Second))
	var hs *httpapi.Server
	if f.httpAddr != "" {
		if hs, err = orch.NewHTTPServer(f.front.serverConfig(f.httpAddr)); err != nil {
			return err
		}
		if err := hs.Start(ctx); err != nil {
			return fmt.Errorf("%w (pass --http ADDR)", err)
		}
		log.Info("http listening", "addr", hs.Addr(), "api_keys", f.front.keys.Len(), "mcp_token", f.front.mcpToken != "",
			"console", "http://"+hs.Addr()+"/ui/", "operators", f.front.uiTokens.Len())
		if c := f.front.mcpConfig(f.httpAddr); c.Closed != "" {
			log.Warn(c.Closed)
		}
	}
	log.Info("toolpool ready", "nats", jetstream.RedactURL(url), "instance", orch.Instance())

	// A connection closed for good leaves the pool a zombie: stop, and
	// exit non-zero so the supervisor starts a fresh process.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	go func() {
		select {
		case <-jetstream.Closed(nc):
			stopRun(toolpool.ErrConnClosed)
		case <-runCtx.Done():
		}
	}()
	if f.ready != nil {
		f.ready(runCtx, orch)
	} else {
		<-runCtx.Done()
	}
	lost := errors.Is(context.Cause(runCtx), toolpool.ErrConnClosed)
	if lost {
		log.Error("the NATS connection is closed for good; stopping so that the orchestrator is restarted", "err", nc.LastError())
	}
	log.Info("shutting down")
	if hs != nil {
		orch.MCP().EndStreams() // MCP sessions' GET streams would hold the drain
		// First the HTTP requests in flight, while the dispatcher and the
		// workers still run: /readyz fails and new requests get 503 at
		// once; then the rest stops.
		if err := hs.Stop(drainCtx(f.front.drainTimeout)); err != nil {
			log.Warn("http requests still in flight after --http-drain-timeout", "timeout", f.front.drainTimeout, "err", err)
		}
	}
	_ = orch.Stop(drainCtx(time.Second)) // nothing waits on it once HTTP is drained
	if srv != nil {
		_ = srv.Stop(drainCtx(f.drainTimeout))
	}
	if lost {
		return toolpool.ErrConnClosed
	}
	return nil
}
