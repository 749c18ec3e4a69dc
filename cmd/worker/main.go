// Command worker is a toolpool worker process: it pulls tool calls from
// NATS JetStream, executes them and publishes their results.
//
//	worker [--nats-url URL] [--tools FILE] [--builtin-tools LIST] [--concurrency N] [--demo-tools] [--metrics ADDR]
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
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	return cli.Main(ctx, workerCommand(), args, stderr, stderr)
}

// workerCommand is the worker binary: flags mapped onto a toolpool.Server.
// Exit 0 after a clean drain, 1 when it could not start or its NATS
// connection closed for good, 2 on bad flags or no connection.
func workerCommand() *cli.Command {
	var (
		natsFlags    cli.NATSFlags
		logFlags     cli.LogFlags
		builtinFlags cli.BuiltinFlags
		catalogFlags cli.CatalogFlags
		wc           worker.Config
		demoTools    bool
		metricsAddr  string
		attemptsTTL  time.Duration
	)
	return &cli.Command{
		Name: "worker",
		Help: "A toolpool worker: pulls tool calls from NATS JetStream, runs them, publishes results.",
		Flags: func(fs *flag.FlagSet) {
			fs.IntVar(&wc.Concurrency, "concurrency", worker.ConcurrencyDefault, "calls this worker executes at once")
			fs.BoolVar(&demoTools, "demo-tools", false, "serve the diagnostic tools echo, sleep and flaky")
			fs.DurationVar(&wc.DrainTimeout, "drain-timeout", worker.DrainTimeoutDefault, "on SIGTERM, how long in-flight calls may finish before they are handed back")
			fs.DurationVar(&wc.PublishRetryFor, "publish-retry-for", worker.PublishRetryForDefault, "how long a result whose publish failed (e.g. during a leader election) is published again before the call is handed back; negative: hand back at once")
			fs.StringVar(&wc.WorkerID, "id", "", "worker id in results and logs (default host-pid-random)")
			fs.StringVar(&metricsAddr, "metrics", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464 (default: none)")
			fs.DurationVar(&attemptsTTL, "attempts-ttl", settle.HistoryTTLDefault, "how long the toolpool_attempts bucket keeps a call's failed attempts (fixed when the bucket is created)")
			natsFlags.Register(fs)
			logFlags.Register(fs)
			builtinFlags.Register(fs, cli.BuiltinNone)
			catalogFlags.Register(fs)
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			switch {
			case len(wc.WorkerID) > worker.WorkerIDMaxBytes:
				return cli.Usagef("--id is %d bytes; the limit is %d", len(wc.WorkerID), worker.WorkerIDMaxBytes)
			case wc.Concurrency < 1:
				return cli.Usagef("--concurrency must be at least 1")
			case wc.DrainTimeout < 0:
				return cli.Usagef("--drain-timeout must not be negative")
			}
			log, err := logFlags.Logger(env.Stderr)
			if err != nil {
				return err
			}
			mreg := metrics.NewRegistry()
			mcpMetrics, err := metrics.NewMCP(mreg)
			if err != nil {
				return err
			}
			catalogFlags.Logger, catalogFlags.MCPMetrics = log, mcpMetrics
			// A worker process may crash on purpose: flaky's "crash" failure.
			reg, closeTools, err := cli.Registry(demoTools, demo.Options{AllowCrash: true}, &catalogFlags, &builtinFlags)
			if err != nil {
				return cli.Usagef("%v", err)
			}
			defer closeTools.Close()
			// With MCP servers in the catalog, tools may come later: a
			// server that is down now is retried, and served when it is up.
			waitForMCP := len(reg.Names()) == 0 && len(catalogFlags.Checks()) > 0
			if len(reg.Names()) == 0 && !waitForMCP {
				return cli.Usagef("no tools to serve: pass --tools FILE, --demo-tools or --builtin-tools all (or names)")
			}
			if waitForMCP {
				log.Warn("no tools to serve yet: waiting for the catalog's MCP servers to come up")
			}
			nc, err := natsFlags.Connect("", "toolpool-worker", log)
			if err != nil {
				return cli.Unavailable(err)
			}
			defer nc.Close()
			srv, err := toolpool.NewServer(toolpool.ServerConfig{
				Conn: nc, Registry: reg, StartEmpty: waitForMCP, Worker: wc, Logger: log, Metrics: mreg, Checks: catalogFlags.Checks(),
				History: settle.HistoryConfig{TTL: attemptsTTL}, Discovery: catalogFlags.Bucket(),
			})
			if err != nil {
				return cli.Usagef("%v", err)
			}
			catalogFlags.FollowMCP(srv, log)
			if metricsAddr != "" {
				stopHTTP, err := cli.ServeHTTP(metricsAddr, srv.Handler(), log)
				if err != nil {
					return cli.Usagef("--metrics: %v", err)
				}
				defer stopHTTP()
			}
			return serve(ctx, srv, nc, wc.DrainTimeout, log)
		},
	}
}

// serve starts srv and runs it until ctx ends (a signal: drain) or its
// connection closes for good (exit 1: a supervisor starts a fresh worker;
// the calls held come back to other workers after their ack wait).
func serve(ctx context.Context, srv *toolpool.Server, nc *nats.Conn, drain time.Duration, log *slog.Logger) error {
	stopCtx := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(context.Background(), d)
		_ = cancel // released when the timer fires: the process ends soon after
		return c
	}
	if err := srv.Start(ctx); err != nil {
		if ctx.Err() != nil { // signalled during start-up: an ordinary shutdown
			_ = cli.DrainConn(nc, 5*time.Second)
			return nil
		}
		if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
			// A refused subject makes the request above time out; say which.
			err = fmt.Errorf("%w\nworker: the NATS user may not use a subject the worker needs (%v); grant it as jetstream/server/accounts.conf does for the worker user", err, last)
		}
		return err
	}
	select {
	case <-ctx.Done():
	case <-jetstream.Closed(nc):
		log.Error("the NATS connection is closed for good; exiting so that the worker is restarted", "err", nc.LastError())
		_ = srv.Stop(stopCtx(toolpool.LostConnDrain))
		return cli.Exit(cli.ExitIsError)
	}
	log.Info("signal received; draining", "drain_timeout", drain)
	if err := srv.Stop(stopCtx(drain)); err != nil {
		log.Warn("drain timeout passed; unfinished calls were handed back to other workers")
	}
	if err := cli.DrainConn(nc, 5*time.Second); err != nil {
		log.Warn("closing the NATS connection", "err", err)
	}
	return nil
}
