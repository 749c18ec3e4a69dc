// Command worker is a toolpool worker process: it pulls tool calls from
// NATS JetStream, executes them and publishes their results.
//
//	worker [--nats-url URL] [--tools FILE] [--builtin-tools LIST] [--concurrency N] [--demo-tools] [--metrics ADDR]
//
// It runs the worker host (internal/worker/host, what toolpool.Server
// wraps) directly, so that it links nothing of the orchestrator side.
//
// Tracing is off unless the OpenTelemetry environment asks for it
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER=otlp, …): then every
// attempt is an "execute_tool <tool>" span of service toolpool-worker,
// exported over OTLP/HTTP and flushed after the drain at SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/worker/host"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	return cli.Main(ctx, workerCommand(), args, stderr, stderr)
}

// workerFlags are the worker's flags, mapped onto a host's config.
type workerFlags struct {
	nats        cli.NATSFlags
	log         cli.LogFlags
	builtin     cli.BuiltinFlags
	catalog     cli.CatalogFlags
	cfg         host.Config // the workers' settings
	demoTools   bool
	metricsAddr string
}

func (f *workerFlags) register(fs *flag.FlagSet) {
	w := &f.cfg.Worker
	fs.IntVar(&w.Concurrency, "concurrency", host.ConcurrencyDefault, "calls this worker executes at once")
	fs.BoolVar(&f.demoTools, "demo-tools", false, "serve the diagnostic tools echo, sleep and flaky")
	fs.DurationVar(&w.DrainTimeout, "drain-timeout", host.DrainTimeoutDefault, "on SIGTERM, how long in-flight calls may finish before they are handed back")
	fs.DurationVar(&w.PublishRetryFor, "publish-retry-for", host.PublishRetryForDefault, "how long a result whose publish failed (e.g. during a leader election) is published again before the call is handed back; negative: hand back at once")
	fs.DurationVar(&w.AckWait, "ack-wait", host.AckWaitDefault, "liveness window: a call held by a worker that stopped answering (killed, cut off) goes to another worker this long after its last heartbeat; give every worker of a tool the same value")
	fs.StringVar(&w.WorkerID, "id", "", "worker id in results and logs (default host-pid-random)")
	fs.StringVar(&f.metricsAddr, "metrics", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464 (default: none)")
	fs.DurationVar(&f.cfg.History.TTL, "attempts-ttl", host.HistoryTTLDefault, "how long the toolpool_attempts bucket keeps a call's failed attempts (fixed when the bucket is created)")
	f.nats.Register(fs)
	f.nats.RegisterReconnect(fs)
	f.log.Register(fs)
	f.builtin.Register(fs, cli.BuiltinNone)
	f.catalog.Register(fs)
}

// check validates the flags; its errors name the flag.
func (f *workerFlags) check() error {
	switch w := f.cfg.Worker; {
	case len(w.WorkerID) > host.WorkerIDMaxBytes:
		return cli.Usagef("--id is %d bytes; the limit is %d", len(w.WorkerID), host.WorkerIDMaxBytes)
	case w.Concurrency < 1:
		return cli.Usagef("--concurrency must be at least 1")
	case w.DrainTimeout < 0:
		return cli.Usagef("--drain-timeout must not be negative")
	case w.AckWait < host.AckWaitMin:
		return cli.Usagef("--ack-wait is %s; it must be at least %s", w.AckWait, host.AckWaitMin)
	}
	return f.nats.CheckReconnect()
}

// loadCatalog loads the tools the flags ask for: the demo tools, the
// catalog file and the built-ins. No tool and no MCP server is a usage
// error; with MCP servers, tools may come later.
func (f *workerFlags) loadCatalog() (*host.Catalog, error) {
	cc, err := f.catalog.Config(&f.builtin)
	if err != nil {
		return nil, err
	}
	// A worker process may crash on purpose: flaky's "crash" failure.
	cc.DemoTools, cc.DemoAllowCrash = f.demoTools, true
	cat, err := host.LoadCatalog(cc)
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	if len(cat.Names()) == 0 && len(cat.MCPServers()) == 0 {
		_ = cat.Close()
		return nil, cli.Usagef("no tools to serve: pass --tools FILE, --demo-tools or --builtin-tools all (or names)")
	}
	return cat, nil
}

// workerCommand is the worker binary: flags mapped onto a worker host.
// Exit 0 after a clean drain, 1 when it could not start or its NATS
// connection closed for good, 2 on bad flags or no connection.
func workerCommand() *cli.Command {
	f := &workerFlags{}
	return &cli.Command{
		Name:  "worker",
		Help:  "A toolpool worker: pulls tool calls from NATS JetStream, runs them, publishes results.",
		Flags: f.register,
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			log, err := f.log.Logger(env.Stderr)
			if err != nil {
				return err
			}
			cat, err := f.loadCatalog()
			if err != nil {
				return err
			}
			nc, err := f.nats.Connect("", "toolpool-worker", log)
			if err != nil {
				_ = cat.Close()
				return cli.Unavailable(err)
			}
			return serve(ctx, f, cat, nc, log)
		},
	}
}

// serve runs the worker host until ctx ends (a signal: drain) or its
// connection closes for good (exit 1: a supervisor starts a fresh worker;
// the calls held come back to other workers after their ack wait).
func serve(ctx context.Context, f *workerFlags, cat *host.Catalog, nc *nats.Conn, log *slog.Logger) error {
	sd := &cli.Shutdown{Role: "worker", Logger: log}
	defer sd.Stop() // a failed start-up
	// Deferred first: the spans are flushed after the workers drained.
	tp, err := cli.Tracing(ctx, sd, "toolpool-worker", log)
	if err != nil {
		_ = cat.Close()
		nc.Close()
		return err
	}
	cfg := f.cfg
	cfg.Conn, cfg.Catalog, cfg.Logger, cfg.Discovery = nc, cat, log, f.catalog.Bucket()
	cfg.Worker.Tracer = tp.Tracer()
	h, err := host.New(cfg)
	if err != nil {
		_ = cat.Close()
		nc.Close()
		return cli.Usagef("%v", err)
	}
	if f.metricsAddr != "" {
		stopHTTP, err := cli.ServeHTTP(f.metricsAddr, h.Handler(), log)
		if err != nil {
			_ = h.Stop(ctx)
			nc.Close()
			return cli.Usagef("--metrics: %v", err)
		}
		sd.Defer("metrics", cli.NoDrain, func(context.Context) error { stopHTTP(); return nil }, "")
	}
	sd.Conn(nc)
	sd.Defer("workers", f.cfg.Worker.DrainTimeout, h.Stop, "drain timeout passed; unfinished calls were handed back to other workers")
	if err := startRefusable(ctx, h, nc); err != nil {
		if ctx.Err() != nil { // signalled during start-up: an ordinary shutdown
			return nil
		}
		if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
			// A refused subject makes the request above fail; say which.
			err = fmt.Errorf("%w\nworker: the NATS user may not use a subject the worker needs (%v); grant it as jetstream/server/accounts.conf does for the worker user", err, last)
		}
		return err
	}
	if err := sd.Wait(ctx, nil); errors.Is(err, cli.ErrConnClosed) {
		return cli.Exit(cli.ExitIsError)
	}
	return nil
}

// refusalPoll is how often startRefusable looks for a refused request.
const refusalPoll = 100 * time.Millisecond

// startRefusable starts h, and ends the start as soon as the server
// refuses one of its JetStream requests for want of permission: such a
// request gets no answer, so the start would otherwise wait out its
// timeout (30 s) before saying why.
func startRefusable(ctx context.Context, h *host.Host, nc *nats.Conn) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		t := time.NewTicker(refusalPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), `"$JS.`) {
				cancel(last)
				return
			}
		}
	}()
	err := h.Start(ctx)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, nats.ErrPermissionViolation) {
		return fmt.Errorf("the start stopped when the server refused a request (%w)", err)
	}
	return err
}
