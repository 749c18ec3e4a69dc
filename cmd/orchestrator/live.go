package main

import (
	"context"
	"flag"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/cli"
)

// liveFlags are the flags of the commands that read a running pool's live
// state (tools, status): the connection and --timeout.
type liveFlags struct {
	nats    cli.NATSFlags
	timeout time.Duration
}

func (f *liveFlags) register(fs *flag.FlagSet) {
	f.nats.Register(fs)
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the server")
}

// connect checks --timeout and connects, as the command env.Path names,
// with a ctx bounded by --timeout; release closes both. Its errors are
// the command's: usage errors and connection errors exit 2.
func (f *liveFlags) connect(ctx context.Context, env *cli.Env) (_ context.Context, _ *nats.Conn, release func(), _ error) {
	if f.timeout <= 0 {
		return nil, nil, nil, cli.Usagef("--timeout must be positive")
	}
	nc, err := f.nats.Connect("", "toolpool-"+env.Path[len("orchestrator "):], cli.WarnLogger(env.Stderr))
	if err != nil {
		return nil, nil, nil, cli.Unavailable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	return ctx, nc, func() { cancel(); nc.Close() }, nil
}
