package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/pkg/discovery"
)

// liveCommand is the shared set-up of the commands that read a running
// pool's live state (tools, status): connection and --timeout flags, no
// positional arguments, a connection and the live tool catalog.
type liveCommand struct {
	name    string
	fs      *flag.FlagSet
	nats    cli.NATSFlags
	timeout *time.Duration
	stderr  io.Writer
}

// newLiveCommand returns the command's flag set, with the shared flags
// registered; the caller adds its own before open.
func newLiveCommand(name, usage string, stderr io.Writer) *liveCommand {
	c := &liveCommand{name: name, fs: flag.NewFlagSet("orchestrator "+name, flag.ContinueOnError), stderr: stderr}
	c.fs.SetOutput(stderr)
	c.fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: orchestrator %s [flags]\n\n%s\n\nflags:\n", name, usage)
		c.fs.PrintDefaults()
	}
	c.nats.Register(c.fs)
	c.timeout = c.fs.Duration("timeout", 10*time.Second, "how long to wait for the server")
	return c
}

// liveEnv is what an opened liveCommand works with. close releases it.
type liveEnv struct {
	ctx  context.Context
	js   js.JetStream
	live *discovery.Catalog
}

// errExit carries the exit code of a command that must stop.
type errExit struct{ code int }

func (e errExit) Error() string { return fmt.Sprintf("exit %d", e.code) }

// open parses args, connects and opens the live catalog, printing any
// problem. On failure the error is an errExit with the code to return.
func (c *liveCommand) open(ctx context.Context, args []string) (*liveEnv, func(), error) {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, errExit{cli.ExitOK}
		}
		return nil, nil, errExit{cli.ExitUsage}
	}
	if c.fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "orchestrator %s: unexpected argument %q\n", c.name, c.fs.Arg(0))
		return nil, nil, errExit{cli.ExitUsage}
	}
	if *c.timeout <= 0 {
		fmt.Fprintf(c.stderr, "orchestrator %s: --timeout must be positive\n", c.name)
		return nil, nil, errExit{cli.ExitUsage}
	}
	log := cli.WarnLogger(c.stderr)
	nc, j, err := c.nats.ConnectJetStream("toolpool-"+c.name, log)
	if err != nil {
		fmt.Fprintf(c.stderr, "orchestrator %s: %v\n", c.name, err)
		return nil, nil, errExit{cli.ExitUsage}
	}
	ctx, cancel := context.WithTimeout(ctx, *c.timeout)
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: log})
	if err == nil {
		err = live.Start(ctx)
	}
	if err != nil {
		cancel()
		nc.Close()
		fmt.Fprintf(c.stderr, "orchestrator %s: %v\n", c.name, err)
		return nil, nil, errExit{cli.ExitUsage}
	}
	return &liveEnv{ctx: ctx, js: j, live: live}, func() {
		_ = live.Stop(context.Background())
		cancel()
		nc.Close()
	}, nil
}

// exitCode is the code an open error asks for.
func exitCode(err error) int {
	var e errExit
	if errors.As(err, &e) {
		return e.code
	}
	return cli.ExitUsage
}
