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
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/discovery"
	"github.com/toolpool/toolpool/pkg/dlq"
	"github.com/toolpool/toolpool/pkg/tools"
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
		concurrency  = fs.Int("concurrency", worker.ConcurrencyDefault, "calls this worker executes at once")
		demoTools    = fs.Bool("demo-tools", false, "serve the diagnostic tools echo, sleep and flaky")
		drainTimeout = fs.Duration("drain-timeout", worker.DrainTimeoutDefault, "on SIGTERM, how long in-flight calls may finish before they are handed back")
		retryFor     = fs.Duration("publish-retry-for", worker.PublishRetryForDefault, "how long a result whose publish failed (e.g. during a leader election) is published again before the call is handed back; negative: hand back at once")
		workerID     = fs.String("id", "", "worker id in results and logs (default host-pid-random)")
		metricsAddr  = fs.String("metrics", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464 (default: none)")
		attemptsTTL  = fs.Duration("attempts-ttl", dlq.HistoryTTLDefault, "how long the toolpool_attempts bucket keeps a call's failed attempts (fixed when the bucket is created)")
	)
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
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "worker: unexpected argument %q\n", fs.Arg(0))
		return cli.ExitUsage
	}
	if len(*workerID) > worker.WorkerIDMaxBytes {
		fmt.Fprintf(stderr, "worker: --id is %d bytes; the limit is %d\n", len(*workerID), worker.WorkerIDMaxBytes)
		return cli.ExitUsage
	}
	log, err := logFlags.Logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return cli.ExitUsage
	}

	reg := tools.NewRegistry()
	if *demoTools {
		// A worker process may crash on purpose: flaky's "crash" failure.
		if err := demo.RegisterWith(reg, demo.Options{AllowCrash: true}); err != nil {
			fmt.Fprintln(stderr, "worker:", err)
			return cli.ExitIsError
		}
	}
	closeBuiltins, err := catalogFlags.RegisterTools(reg, &builtinFlags)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return cli.ExitUsage
	}
	defer closeBuiltins.Close()
	if len(reg.Names()) == 0 {
		fmt.Fprintln(stderr, "worker: no tools to serve: pass --tools FILE, --demo-tools or --builtin-tools all (or names)")
		return cli.ExitUsage
	}

	nc, err := natsFlags.Connect("", "toolpool-worker", log)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return cli.ExitUsage
	}
	defer nc.Close()
	jsCtx, err := js.New(nc)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return cli.ExitUsage
	}
	obs, err := startObservability(*metricsAddr, nc, jsCtx, reg.Names(), log)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return cli.ExitUsage
	}
	defer obs.stop()
	var history worker.History // best effort: without it, dead letters carry only their last attempt
	historyCtx, cancelHistory := context.WithTimeout(ctx, 30*time.Second)
	if h, err := dlq.OpenHistory(historyCtx, jsCtx, dlq.HistoryConfig{TTL: *attemptsTTL}); err != nil {
		log.Warn("no attempt history: dead letters will carry only their last attempt", "err", err)
	} else {
		history = h
	}
	cancelHistory()
	w, err := worker.New(worker.Config{
		JetStream: jsCtx, Registry: reg, Concurrency: *concurrency,
		WorkerID: *workerID, DrainTimeout: *drainTimeout, PublishRetryFor: *retryFor, Logger: log, History: history,
		Metrics: obs.workerMetrics(),
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return cli.ExitUsage
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = w.Start(startCtx)
	var announcer *discovery.Announcer
	if err == nil {
		announcer, err = catalogFlags.Announce(startCtx, jsCtx, reg, w.ID(), log)
		if err != nil {
			stopCtx, cancelStop := context.WithTimeout(context.Background(), *drainTimeout)
			_ = w.Stop(stopCtx)
			cancelStop()
			err = fmt.Errorf("worker: announcing the tools: %w", err)
		}
	}
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			// Signalled during start-up: an ordinary shutdown.
			stopCtx, cancelStop := context.WithTimeout(context.Background(), *drainTimeout)
			_ = w.Stop(stopCtx)
			cancelStop()
			_ = cli.DrainConn(nc, 5*time.Second)
			return cli.ExitOK
		}
		fmt.Fprintln(stderr, err)
		if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
			// A refused subject makes the request above time out; say which.
			fmt.Fprintf(stderr, "worker: the NATS user may not use a subject the worker needs (%v); grant it as jetstream/server/accounts.conf does for the worker user\n", last)
		}
		return cli.ExitIsError
	}
	obs.setReady(true)
	select {
	case <-ctx.Done():
	case <-jetstream.Closed(nc):
		// Closed for good (reconnects never give up, so a protocol error
		// or refused credentials): without NATS the worker is a zombie.
		// Exit non-zero so the supervisor starts a fresh one; the calls
		// held come back to other workers after their ack wait.
		obs.setReady(false)
		log.Error("the NATS connection is closed for good; exiting so that the worker is restarted", "err", nc.LastError())
		stopCtx, cancelStop := context.WithTimeout(context.Background(), time.Second)
		_ = w.Stop(stopCtx) // cancels the calls running: their results could not be published
		cancelStop()
		return cli.ExitIsError
	}
	obs.setReady(false)
	log.Info("signal received; draining", "drain_timeout", *drainTimeout)
	withdrawCtx, cancelWithdraw := context.WithTimeout(context.Background(), 5*time.Second)
	if announcer != nil {
		if err := announcer.Stop(withdrawCtx); err != nil {
			log.Warn("withdrawing the tools' announcements failed; they expire on their own", "err", err)
		}
	}
	cancelWithdraw()
	stopCtx, cancel := context.WithTimeout(context.Background(), *drainTimeout)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		log.Warn("drain timeout passed; unfinished calls were handed back to other workers")
	}
	if err := cli.DrainConn(nc, 5*time.Second); err != nil {
		log.Warn("closing the NATS connection", "err", err)
	}
	return cli.ExitOK
}
