package main

import (
	"context"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/infra/discovery"
)

// livePool is an opened connection with the live tool catalog (status
// reads it); close releases it.
type livePool struct {
	ctx     context.Context // bounded by --timeout
	js      js.JetStream
	catalog *discovery.Catalog
	close   func()
}

// open connects and opens the live catalog. Its errors are the command's:
// usage errors and connection errors exit 2.
func (f *liveFlags) open(ctx context.Context, env *cli.Env) (*livePool, error) {
	ctx, nc, release, err := f.connect(ctx, env)
	if err != nil {
		return nil, err
	}
	j, err := js.New(nc)
	if err != nil {
		release()
		return nil, cli.Unavailable(err)
	}
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: cli.WarnLogger(env.Stderr)})
	if err == nil {
		err = live.Start(ctx)
	}
	if err != nil {
		release()
		return nil, cli.Unavailable(err)
	}
	return &livePool{ctx: ctx, js: j, catalog: live, close: func() {
		_ = live.Stop(context.Background())
		release()
	}}, nil
}
