package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/discovery"
	"github.com/toolpool/toolpool/pkg/dispatch"
	"github.com/toolpool/toolpool/pkg/dlq"
	"github.com/toolpool/toolpool/pkg/health"
	"github.com/toolpool/toolpool/pkg/httpapi"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
	"github.com/toolpool/toolpool/pkg/worker"
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
	set          map[string]bool // flags given on the command line
	// ready, when set, runs once the pool is up, in place of waiting for
	// ctx (orchestrator run uses it); the pool shuts down when it returns.
	ready func(ctx context.Context, d *dispatch.Dispatcher, defs func(context.Context) []tools.Definition)
}

func parseServe(args []string, stderr io.Writer) (*serveFlags, error) {
	return parsePoolFlags("orchestrator serve", args, stderr, nil)
}

// parsePoolFlags parses the flags that set up a pool; extra, when set, adds
// a command's own flags (and may change defaults and usage) before parsing.
func parsePoolFlags(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: orchestrator [serve] [flags]\n\nRuns the pool. With no --nats-url (or NATS_URL) it starts an embedded JetStream\nserver, provisions the streams and runs --workers in-process workers.\n\nflags:")
		fs.PrintDefaults()
	}
	f.nats.Register(fs)
	f.log.Register(fs)
	fs.StringVar(&f.dataDir, "data-dir", "data", "embedded server: where JetStream keeps its store")
	fs.StringVar(&f.natsListen, "nats-listen", jetstream.EmbeddedListenDefault, "embedded server: client address, so separate worker processes can join")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "HTTP address (agent API, /metrics, /healthz, /readyz); empty to disable")
	f.builtin.Register(fs, cli.BuiltinAll)
	f.catalog.Register(fs)
	fs.StringVar(&f.instance, "instance", "", "this orchestrator's id in result subjects (default random)")
	// Mode-dependent defaults: the flags' own defaults are zero (which flag
	// does not print) and the usage says what applies; set after parsing.
	fs.IntVar(&f.workers, "workers", 0, "in-process workers (default 4 with the embedded server, 0 with --nats-url)")
	fs.IntVar(&f.concurrency, "concurrency", worker.ConcurrencyDefault, "calls each in-process worker executes at once")
	fs.BoolVar(&f.demoTools, "demo-tools", false, "serve the diagnostic tools echo, sleep and flaky (default on with the embedded server, off with --nats-url)")
	fs.IntVar(&f.replicas, "replicas", 1, "stream replicas (3 on a cluster)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", worker.DrainTimeoutDefault, "on SIGTERM, how long in-flight calls may finish")
	fs.DurationVar(&f.retryFor, "publish-retry-for", dispatch.PublishRetryForDefault, "how long a call JetStream did not acknowledge (e.g. during a leader election) is published again before the agent gets a 503; negative: at once")
	fs.DurationVar(&f.attemptsTTL, "attempts-ttl", dlq.HistoryTTLDefault, "how long the toolpool_attempts bucket keeps a call's failed attempts (fixed when the bucket is created)")
	f.front.register(fs)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if f.nats.URL() == "" {
		if !f.set["workers"] {
			f.workers = workersEmbeddedDefault
		}
		if !f.set["demo-tools"] {
			f.demoTools = true
		}
	}
	if f.instance != "" {
		if err := jetstream.CheckToken("--instance", f.instance); err != nil {
			return nil, cli.Usagef("%v", err)
		}
	}
	if f.workers < 0 {
		return nil, cli.Usagef("--workers must not be negative")
	}
	if f.catalog.Path != "" && f.workers == 0 {
		return nil, cli.Usagef("--tools needs in-process workers (--workers N); or give the catalog to separate worker processes")
	}
	f.catalog.Replicas = f.replicas
	if f.concurrency < 1 {
		return nil, cli.Usagef("--concurrency must be at least 1")
	}
	if err := f.front.check(f.httpAddr); err != nil {
		return nil, err
	}
	return f, nil
}

func serve(ctx context.Context, args []string, stderr io.Writer) int {
	f, err := parseServe(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		var ue *cli.UsageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, "orchestrator:", err)
		}
		return cli.ExitUsage
	}
	log, err := f.log.Logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator:", err)
		return cli.ExitUsage
	}
	if err := runServe(ctx, f, log); err != nil {
		log.Error("orchestrator stopped", "err", err)
		return cli.ExitIsError
	}
	return cli.ExitOK
}

// runServe runs the pool until ctx is done.
func runServe(ctx context.Context, f *serveFlags, log *slog.Logger) error {
	url := f.nats.URL()
	var emb *jetstream.Embedded
	if url == "" {
		var err error
		emb, err = jetstream.StartEmbedded(jetstream.EmbeddedOptions{
			Listen: f.natsListen, DataDir: f.dataDir, Logger: log,
		})
		if err != nil {
			return err
		}
		defer emb.Shutdown()
		url = emb.ClientURL()
		log.Info("embedded JetStream server started", "url", url, "data_dir", f.dataDir)
	}
	nc, err := f.nats.Connect(url, "toolpool-orchestrator", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	jsCtx, err := js.New(nc, js.WithPublishAsyncTimeout(dispatch.PublishAsyncTimeout))
	if err != nil {
		return err
	}
	provCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = jetstream.Provision(provCtx, jsCtx, jetstream.Config{Replicas: f.replicas})
	cancel()
	if err != nil {
		return err
	}
	om, err := newServeMetrics(jsCtx, log)
	if err != nil {
		return err
	}
	history, poison, err := startDeadLetters(ctx, nc, jsCtx, f.attemptsTTL, f.replicas, om.dispatch.PoisonCall, log)
	if err != nil {
		return err
	}
	defer func() { _ = poison.Stop(context.Background()) }()

	reg := tools.NewRegistry()
	if f.demoTools {
		if err := demo.Register(reg); err != nil {
			return err
		}
	}
	if f.workers > 0 {
		closeBuiltins, err := f.catalog.RegisterTools(reg, &f.builtin)
		if err != nil {
			return err
		}
		defer closeBuiltins.Close()
	}
	var workers []*worker.Worker
	var announcers []*discovery.Announcer
	if f.workers > 0 && len(reg.Names()) > 0 {
		if err := om.addWorkers(reg.Names()); err != nil {
			return err
		}
		for i := range f.workers {
			w, err := worker.New(worker.Config{
				JetStream: jsCtx, Registry: reg, Concurrency: f.concurrency,
				DrainTimeout: f.drainTimeout, Logger: log.With("worker", i), History: history,
				Metrics: om.worker,
			})
			if err != nil {
				return err
			}
			if err := w.Start(ctx); err != nil {
				return err
			}
			workers = append(workers, w)
			a, err := f.catalog.Announce(ctx, jsCtx, reg, w.ID(), log)
			if err != nil {
				return fmt.Errorf("announcing the tools: %w", err)
			}
			announcers = append(announcers, a)
		}
		log.Info("in-process workers started", "workers", f.workers, "tools", reg.Names())
	}

	live, err := discovery.NewCatalog(ctx, discovery.CatalogConfig{JetStream: jsCtx, Bucket: f.catalog.Bucket(), Logger: log})
	if err != nil {
		return err
	}
	defer live.Close()
	d, err := dispatch.New(dispatch.Config{
		JS: jsCtx, Instance: f.instance, Catalog: live, Logger: log, Metrics: om.dispatch,
		PublishRetryFor:  f.retryFor,
		MaxCallsInFlight: f.front.maxInFlight, MaxQueueDepth: f.front.maxQueueDepth,
		NoQueueWaitAdmission: !f.front.byQueueWait,
	})
	if err != nil {
		return err
	}
	if err := d.Start(ctx); err != nil {
		return err
	}
	defer d.Stop()

	var srv *httpapi.Server
	if f.httpAddr != "" {
		ln, err := net.Listen("tcp", f.httpAddr)
		if err != nil {
			return fmt.Errorf("http: listen on %s: %w (pass --http ADDR)", f.httpAddr, err)
		}
		api, err := newAPI(d, live.Definitions, log, f.front.apiConfig(om.front))
		if err != nil {
			_ = ln.Close()
			return err
		}
		ready := health.Check{Name: "http", Func: func(ctx context.Context) error { return srv.Ready(ctx) }}
		srv, err = f.front.server(f.httpAddr, om.handler(newHTTPHandler(nc, jsCtx, api, ready)), log, om.front)
		if err != nil {
			_ = ln.Close()
			return err
		}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server failed", "err", err)
			}
		}()
		log.Info("http listening", "addr", ln.Addr().String(), "api_keys", f.front.keys.Len())
	}
	log.Info("toolpool ready", "nats", jetstream.RedactURL(url), "instance", d.Instance())

	// A connection closed for good (a protocol error, refused credentials:
	// reconnects never give up otherwise) leaves the pool a zombie: stop,
	// and exit non-zero so the supervisor starts a fresh process.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	go func() {
		select {
		case <-jetstream.Closed(nc):
			stopRun(errConnClosed)
		case <-runCtx.Done():
		}
	}()
	if f.ready != nil {
		f.ready(runCtx, d, live.Definitions)
	} else {
		<-runCtx.Done()
	}
	lost := errors.Is(context.Cause(runCtx), errConnClosed)
	if lost {
		log.Error("the NATS connection is closed for good; stopping so that the orchestrator is restarted", "err", nc.LastError())
	}
	log.Info("shutting down")
	if srv != nil {
		// First the HTTP requests in flight, while the dispatcher and the
		// workers still run: /readyz fails and new requests get 503 at
		// once; then the rest stops.
		sctx, cancel := context.WithTimeout(context.Background(), f.front.drainTimeout)
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("http requests still in flight after --http-drain-timeout", "timeout", f.front.drainTimeout, "err", err)
		}
		cancel()
	}
	for _, a := range announcers { // withdrawn first: no new calls are routed here
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = a.Stop(actx)
		cancel()
	}
	drain := f.drainTimeout
	if lost {
		drain = min(drain, time.Second) // no result could be published
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			_ = w.Stop(sctx)
		})
	}
	wg.Wait()
	if lost {
		return errConnClosed
	}
	return nil
}

// errConnClosed ends serve when its NATS connection closed for good.
var errConnClosed = errors.New("the NATS connection is closed for good")

// newHTTPHandler serves health (503 once the NATS connection is closed for
// good), readiness (NATS connected, streams present, the store takes a
// write: package health) and, under /v1/, the agent API
// (POST /v1/tool_calls, GET /v1/tools: see newAPI). The API's endpoints
// have patterns of their own so that metrics label requests by them.
func newHTTPHandler(nc *nats.Conn, jsCtx js.JetStream, api http.Handler, extra ...health.Check) *http.ServeMux {
	mux := http.NewServeMux()
	health.New(0, append(extra, health.NATSConnected(nc), health.Streams(jsCtx), health.StoreWritable(jsCtx))...).
		WithLiveness(health.NATSNotClosed(nc)).Register(mux)
	mux.Handle(httpapi.PathToolCalls, api)
	mux.Handle(httpapi.PathTools, api)
	mux.Handle("/v1/", api)
	return mux
}

// newAPI is the agent API (package httpapi): tool calls through d, the
// tool definitions that defs lists (the live ones).
func newAPI(d httpapi.Dispatcher, defs func(context.Context) []tools.Definition, log *slog.Logger, cfg httpapi.Config) (*httpapi.Handler, error) {
	cfg.Dispatcher = d
	cfg.Definitions = httpapi.DefinitionsFunc(func(ctx context.Context) ([]tools.Definition, error) {
		return defs(ctx), nil
	})
	cfg.Logger = log
	return httpapi.New(cfg)
}
