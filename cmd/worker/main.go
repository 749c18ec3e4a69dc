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
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/dlq"
	"github.com/toolpool/toolpool/pkg/tools/demo"
	"github.com/toolpool/toolpool/pkg/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: worker [flags]\n\nA toolpool worker: pulls tool calls from NATS JetStream, runs them, publishes results.\n\nflags:")
		fs.PrintDefaults()
	}
	var (
		natsFlags    cli.NATSFlags
		logFlags     cli.LogFlags
		builtinFlags cli.BuiltinFlags
		catalogFlags cli.CatalogFlags
		wc           worker.Config
		demoTools    = fs.Bool("demo-tools", false, "serve the diagnostic tools echo, sleep and flaky")
		metricsAddr  = fs.String("metrics", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464 (default: none)")
		attemptsTTL  = fs.Duration("attempts-ttl", dlq.HistoryTTLDefault, "how long the toolpool_attempts bucket keeps a call's failed attempts (fixed when the bucket is created)")
	)
	fs.IntVar(&wc.Concurrency, "concurrency", worker.ConcurrencyDefault, "calls this worker executes at once")
	fs.DurationVar(&wc.DrainTimeout, "drain-timeout", worker.DrainTimeoutDefault, "on SIGTERM, how long in-flight calls may finish before they are handed back")
	fs.DurationVar(&wc.PublishRetryFor, "publish-retry-for", worker.PublishRetryForDefault, "how long a result whose publish failed (e.g. during a leader election) is published again before the call is handed back; negative: hand back at once")
	fs.StringVar(&wc.WorkerID, "id", "", "worker id in results and logs (default host-pid-random)")
	natsFlags.Register(fs)
	logFlags.Register(fs)
	builtinFlags.Register(fs, cli.BuiltinNone)
	catalogFlags.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "worker: "+format+"\n", a...)
		return cli.ExitUsage
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	if len(wc.WorkerID) > worker.WorkerIDMaxBytes {
		return usage("--id is %d bytes; the limit is %d", len(wc.WorkerID), worker.WorkerIDMaxBytes)
	}
	log, err := logFlags.Logger(stderr)
	if err != nil {
		return usage("%v", err)
	}
	// A worker process may crash on purpose: flaky's "crash" failure.
	reg, closeTools, err := cli.Registry(*demoTools, demo.Options{AllowCrash: true}, &catalogFlags, &builtinFlags)
	if err != nil {
		return usage("%v", err)
	}
	defer closeTools.Close()
	if len(reg.Names()) == 0 {
		return usage("no tools to serve: pass --tools FILE, --demo-tools or --builtin-tools all (or names)")
	}
	nc, err := natsFlags.Connect("", "toolpool-worker", log)
	if err != nil {
		return usage("%v", err)
	}
	defer nc.Close()
	srv, err := toolpool.NewServer(toolpool.ServerConfig{
		Conn: nc, Registry: reg, Worker: wc, Logger: log,
		History: dlq.HistoryConfig{TTL: *attemptsTTL}, Discovery: catalogFlags.Bucket(),
	})
	if err != nil {
		return usage("%v", err)
	}
	if *metricsAddr != "" {
		stopHTTP, err := cli.ServeHTTP(*metricsAddr, srv.Handler(), log)
		if err != nil {
			return usage("--metrics: %v", err)
		}
		defer stopHTTP()
	}
	stopCtx := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(context.Background(), d)
		_ = cancel // released when the timer fires: the process ends soon after
		return c
	}
	if err := srv.Start(ctx); err != nil {
		if ctx.Err() != nil { // signalled during start-up: an ordinary shutdown
			_ = cli.DrainConn(nc, 5*time.Second)
			return cli.ExitOK
		}
		fmt.Fprintln(stderr, "worker:", err)
		if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
			// A refused subject makes the request above time out; say which.
			fmt.Fprintf(stderr, "worker: the NATS user may not use a subject the worker needs (%v); grant it as jetstream/server/accounts.conf does for the worker user\n", last)
		}
		return cli.ExitIsError
	}
	select {
	case <-ctx.Done():
	case <-jetstream.Closed(nc):
		// Closed for good (reconnects never give up, so a protocol error or
		// refused credentials): without NATS the worker is a zombie. Exit
		// non-zero so the supervisor starts a fresh one; the calls held
		// come back to other workers after their ack wait.
		log.Error("the NATS connection is closed for good; exiting so that the worker is restarted", "err", nc.LastError())
		_ = srv.Stop(stopCtx(toolpool.LostConnDrain))
		return cli.ExitIsError
	}
	log.Info("signal received; draining", "drain_timeout", wc.DrainTimeout)
	if err := srv.Stop(stopCtx(wc.DrainTimeout)); err != nil {
		log.Warn("drain timeout passed; unfinished calls were handed back to other workers")
	}
	if err := cli.DrainConn(nc, 5*time.Second); err != nil {
		log.Warn("closing the NATS connection", "err", err)
	}
	return cli.ExitOK
}
