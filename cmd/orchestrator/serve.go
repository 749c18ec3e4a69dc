package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
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
	asyncKeep    time.Duration
	asyncLease   time.Duration
	backlogAge   time.Duration
	retryFor     time.Duration
	front        httpFlags
	// ready, when set, runs once the pool is up, in place of waiting for
	// ctx (orchestrator run uses it); the pool shuts down when it returns.
	ready func(ctx context.Context, orch *toolpool.Orchestrator)
	// tracer records spans when the OTEL_* environment asks for them
	// (cli.Tracing); nil: off.
	tracer trace.TracerProvider
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
	f.nats.RegisterReconnect(fs)
	f.log.Register(fs)
	fs.StringVar(&f.dataDir, "data-dir", "data", "embedded server: where JetStream keeps its store")
	fs.StringVar(&f.natsListen, "nats-listen", toolpool.EmbeddedListenDefault, "embedded server: client address, so separate worker processes can join")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "HTTP address (agent API, /metrics, /healthz, /readyz); empty to disable")
	f.builtin.Register(fs, cli.BuiltinAll)
	f.catalog.Register(fs)
	fs.StringVar(&f.instance, "instance", "", "this orchestrator's id in result subjects (default random)")
	// Mode-dependent defaults: the flags' own defaults are zero (which flag
	// does not print) and the usage says what applies; set by check.
	fs.IntVar(&f.workers, "workers", 0, "in-process workers (default 4 with the embedded server, 0 with --nats-url)")
	fs.IntVar(&f.concurrency, "concurrency", toolpool.ConcurrencyDefault, "calls each in-process worker executes at once")
	fs.BoolVar(&f.demoTools, "demo-tools", false, "serve the diagnostic tools echo, sleep and flaky (default on with the embedded server, off with --nats-url)")
	fs.IntVar(&f.replicas, "replicas", 1, "stream replicas (3 on a cluster)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", toolpool.DrainTimeoutDefault, "on SIGTERM, how long in-flight calls may finish")
	fs.DurationVar(&f.retryFor, "publish-retry-for", toolpool.OrchestratorPublishRetryForDefault, "how long a call JetStream did not acknowledge (e.g. during a leader election) is published again before the agent gets a 503; negative: at once")
	fs.DurationVar(&f.attemptsTTL, "attempts-ttl", toolpool.HistoryTTLDefault, "how long the toolpool_attempts bucket keeps a call's failed attempts (fixed when the bucket is created)")
	fs.DurationVar(&f.asyncKeep, "async-retention", toolpool.AsyncRetentionDefault, "how long an async call's or MCP task's results are kept after it ended (the toolpool_tasks bucket's TTL, fixed when the bucket is created; at least 1m)")
	fs.DurationVar(&f.asyncLease, "async-lease", toolpool.AsyncLeaseDefault, "how long a replica's claim on an async call or MCP task it runs lasts unrefreshed: another replica adopts the task this long after its replica died; give every replica the same value; at least 1s")
	fs.DurationVar(&f.backlogAge, "backlog-age", toolpool.BacklogAgeDefault, "a tool whose oldest queued call is older than this is backing up (the console's overview, toolpool_backlog_state, the alerts)")
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
		if err := cli.CheckToken("--instance", f.instance); err != nil {
			return err
		}
	}
	if err := f.nats.CheckReconnect(); err != nil {
		return err
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
	if f.asyncLease < toolpool.AsyncLeaseMin {
		return cli.Usagef("--async-lease is %s; it must be at least %s", f.asyncLease, toolpool.AsyncLeaseMin)
	}
	if f.backlogAge <= 0 {
		return cli.Usagef("--backlog-age must be positive, e.g. 30s")
	}
	return f.front.check(f.httpAddr)
}

// runServe runs the pool until ctx is done (or f.ready returns, or the
// NATS connection closes for good): the embedded server unless
// --nats-url names one, the streams, the in-process workers, the
// orchestrator and the HTTP server, stopped in the reverse order by the
// one shutdown (cli.Shutdown).
func runServe(ctx context.Context, f *serveFlags, log *slog.Logger) error {
	sd := &cli.Shutdown{Role: "orchestrator", Logger: log}
	defer sd.Stop()                                               // a failed start-up
	tp, err := cli.Tracing(ctx, sd, "toolpool-orchestrator", log) // first: flushed last
	if err != nil {
		return err
	}
	f.tracer = tp.TracerProvider()
	nc, url, err := f.connect(ctx, sd, log)
	if err != nil {
		return err
	}
	if err := toolpool.Provision(ctx, nc, toolpool.StreamsConfig{Replicas: f.replicas}); err != nil {
		return err
	}
	metrics := toolpool.NewMetricsRegistry()
	srv, err := f.startServer(ctx, sd, nc, metrics, log)
	if err != nil {
		return err
	}
	orch, err := f.startOrchestrator(ctx, sd, nc, metrics, srv, log)
	if err != nil {
		return err
	}
	if err := f.startHTTP(ctx, sd, orch, log); err != nil {
		return err
	}
	log.Info("toolpool ready", "nats", cli.RedactURL(url), "instance", orch.Instance())
	var ready func(context.Context)
	if f.ready != nil {
		ready = func(ctx context.Context) { f.ready(ctx, orch) }
	}
	return sd.Wait(ctx, ready)
}

// connect starts the embedded server unless --nats-url names one, and
// connects to it; both are stopped by sd.
func (f *serveFlags) connect(ctx context.Context, sd *cli.Shutdown, log *slog.Logger) (*nats.Conn, string, error) {
	url := f.nats.URL()
	if url == "" {
		emb, err := toolpool.NewEmbedded(toolpool.EmbeddedConfig{Listen: f.natsListen, DataDir: f.dataDir, Logger: log})
		if err == nil {
			err = emb.Start(ctx)
		}
		if errors.Is(err, toolpool.ErrListenAddrInUse) {
			return nil, "", fmt.Errorf("%w; pass --nats-listen with a free address (e.g. --nats-listen 127.0.0.1:4223, "+
				"and NATS_URL=nats://127.0.0.1:4223 for the other commands), or --nats-url to join the server listening there", err)
		}
		if err != nil {
			return nil, "", err
		}
		sd.Defer("embedded server", cli.NoDrain, emb.Stop, "")
		url = emb.URL()
		log.Info("embedded JetStream server started", "url", url, "data_dir", f.dataDir)
	}
	nc, err := f.nats.Connect(url, "toolpool-orchestrator", log)
	if err != nil {
		return nil, "", err
	}
	sd.Conn(nc) // drained after the workers: it flushes what they publish last
	return nc, url, nil
}

// startServer starts the in-process workers (none with --workers 0, or
// with no tool to serve) serving the demo tools, the catalog and the
// built-ins the flags ask for; nil without them.
func (f *serveFlags) startServer(ctx context.Context, sd *cli.Shutdown, nc *nats.Conn, metrics *toolpool.MetricsRegistry, log *slog.Logger) (*toolpool.Server, error) {
	if f.workers == 0 {
		return nil, nil
	}
	cc, err := f.catalog.Config(&f.builtin)
	if err != nil {
		return nil, err
	}
	cat, err := toolpool.LoadCatalog(toolpool.CatalogConfig{
		DemoTools: f.demoTools, File: cc.Path, AllBuiltins: cc.AllBuiltins, Builtins: cc.Builtins,
		Workspace: cc.Builtin.Workspace, SearchURL: cc.Builtin.SearchURL,
		HTTPAllowHosts: cc.Builtin.AllowHosts, HTTPAllowCIDRs: cc.Builtin.AllowCIDRs,
	})
	if err != nil {
		return nil, err
	}
	if len(cat.Names()) == 0 && len(cat.MCPServers()) == 0 {
		return nil, cat.Close()
	}
	srv, err := toolpool.NewServer(toolpool.ServerConfig{
		Conn: nc, Catalog: cat, Workers: f.workers, Concurrency: f.concurrency, DrainTimeout: f.drainTimeout,
		Replicas: f.replicas, HistoryTTL: f.attemptsTTL, DiscoveryTTL: f.catalog.DiscoveryTTL, Metrics: metrics, Logger: log,
		TracerProvider: f.tracer,
	})
	if err != nil {
		_ = cat.Close()
		return nil, err
	}
	sd.Defer("workers", f.drainTimeout, srv.Stop, "")
	// First: the orchestrator's catalog then sees its tools at once.
	return srv, srv.Start(ctx)
}

// startOrchestrator starts the orchestrator: the dispatcher and the front
// doors' handlers, with srv's readiness (when not nil) in its own.
func (f *serveFlags) startOrchestrator(ctx context.Context, sd *cli.Shutdown, nc *nats.Conn, metrics *toolpool.MetricsRegistry, srv *toolpool.Server, log *slog.Logger) (*toolpool.Orchestrator, error) {
	cfg := toolpool.OrchestratorConfig{
		Conn: nc, Instance: f.instance, Replicas: f.replicas, PublishRetryFor: f.retryFor,
		MaxCallsInFlight: f.front.maxInFlight, MaxQueueDepth: f.front.maxQueueDepth,
		NoQueueWaitAdmission: !f.front.byQueueWait, NoFairness: !f.front.fairness,
		DiscoveryTTL: f.catalog.DiscoveryTTL, HistoryTTL: f.attemptsTTL, AsyncRetention: f.asyncKeep, AsyncLease: f.asyncLease, BacklogAge: f.backlogAge, Metrics: metrics, Logger: log,
		TracerProvider: f.tracer,
	}
	f.front.apply(&cfg, f.httpAddr)
	if srv != nil {
		// The MCP servers' status is among them as a detail: the
		// orchestrator serves its other tools while one is down.
		cfg.Checks = srv.Checks()
	}
	orch, err := toolpool.NewOrchestrator(cfg)
	if err != nil {
		return nil, err
	}
	sd.Defer("orchestrator", time.Second, orch.Stop, "") // nothing waits on it once HTTP is drained
	return orch, orch.Start(ctx)
}

// startHTTP starts the HTTP server of --http (none when it is empty). Its
// drain comes first at shutdown, while the orchestrator and the workers
// still run: /readyz fails and new requests get 503 at once.
func (f *serveFlags) startHTTP(ctx context.Context, sd *cli.Shutdown, orch *toolpool.Orchestrator, log *slog.Logger) error {
	if f.httpAddr == "" {
		return nil
	}
	hs, err := orch.NewHTTPServer(f.front.serverConfig(f.httpAddr))
	if err != nil {
		return err
	}
	if err := hs.Start(ctx); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w (pass --http with a free address, e.g. --http 127.0.0.1:8081, or --http '' for no HTTP server)", err)
		}
		return fmt.Errorf("%w (pass --http ADDR)", err)
	}
	sd.Defer("http", f.front.drainTimeout, hs.Stop, "http requests still in flight after --http-drain-timeout")
	log.Info("http listening", "addr", hs.Addr(), "api_keys", len(f.front.keys), "mcp_token", f.front.mcpToken != "",
		"console", "http://"+hs.Addr()+"/ui/", "operators", len(f.front.uiTokens))
	if c := f.front.mcpConfig(f.httpAddr); c.Closed != "" {
		log.Warn(c.Closed)
	}
	return nil
}
