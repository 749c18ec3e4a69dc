// Command worker is a toolpool worker process: it pulls tool calls from
// NATS JetStream, executes them and publishes their results.
//
//	worker [--nats-url URL] [--concurrency N] [--demo-tools]
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

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/cli"
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
		concurrency  = fs.Int("concurrency", worker.ConcurrencyDefault, "calls this worker executes at once")
		demoTools    = fs.Bool("demo-tools", false, "serve the diagnostic tools echo, sleep and flaky")
		drainTimeout = fs.Duration("drain-timeout", worker.DrainTimeoutDefault, "on SIGTERM, how long in-flight calls may finish before they are handed back")
		workerID     = fs.String("id", "", "worker id in results and logs (default host-pid-random)")
	)
	natsFlags.Register(fs)
	logFlags.Register(fs)
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
	log, err := logFlags.Logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return cli.ExitUsage
	}

	reg := tools.NewRegistry()
	if *demoTools {
		if err := demo.Register(reg); err != nil {
			fmt.Fprintln(stderr, "worker:", err)
			return cli.ExitIsError
		}
	}
	if len(reg.Names()) == 0 {
		fmt.Fprintln(stderr, "worker: no tools to serve: pass --demo-tools")
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
	w, err := worker.New(worker.Config{
		JetStream: jsCtx, Registry: reg, Concurrency: *concurrency,
		WorkerID: *workerID, DrainTimeout: *drainTimeout, Logger: log,
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return cli.ExitUsage
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = w.Start(startCtx)
	cancel()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return cli.ExitIsError
	}
	<-ctx.Done()
	log.Info("signal received; draining", "drain_timeout", *drainTimeout)
	stopCtx, cancel := context.WithTimeout(context.Background(), *drainTimeout)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		log.Warn("drain timeout passed; unfinished calls were handed back to other workers")
	}
	if err := nc.Drain(); err != nil {
		log.Warn("closing the NATS connection", "err", err)
	}
	return cli.ExitOK
}
