package opscmd

import (
	"context"
	"flag"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/infra/discovery"
)

// liveFlags are the flags of a command that reads a running pool's live
// state (status): the connection and --timeout.
type liveFlags struct {
	nats    cli.NATSFlags
	timeout time.Duration
}

// register adds the connection's flags and --timeout to fs.
func (f *liveFlags) register(fs *flag.FlagSet) {
	f.nats.Register(fs)
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the server")
}

// livePool is an opened connection with the live tool catalog; close
// releases it.
type livePool struct {
	ctx     context.Context // bounded by --timeout
	js      js.JetStream
	catalog *discovery.Catalog
	close   func()
}

// open connects and opens the live catalog. Its errors are the command's:
// usage errors and connection errors exit 2.
func (f *liveFlags) open(ctx context.Context, env *cli.Env) (*livePool, error) {
	if f.timeout <= 0 {
		return nil, cli.Usagef("--timeout must be positive")
	}
	log := cli.WarnLogger(env.Stderr)
	nc, j, err := f.nats.ConnectJetStream("toolpool-"+env.Path[len("orchestrator "):], log)
	if err != nil {
		return nil, cli.Unavailable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: log})
	if err == nil {
		err = live.Start(ctx)
	}
	if err != nil {
		cancel()
		nc.Close()
		return nil, cli.Unavailable(err)
	}
	return &livePool{ctx: ctx, js: j, catalog: live, close: func() {
		_ = live.Stop(context.Background())
		cancel()
		nc.Close()
	}}, nil
}
