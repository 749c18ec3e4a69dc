// Package pooltest starts a whole toolpool inside a test: an embedded
// JetStream server with the streams provisioned (internal/natstest), a
// pkg/worker serving the demo tools echo, sleep and flaky on a connection
// of its own, and a started dispatcher whose catalog is the worker's
// registry. Everything stops when the test ends.
//
//	p := pooltest.Start(t)
//	res, err := p.D.Dispatch(ctx, "session", calls)
//	p.Stop()      // the NATS server goes away: publishes fail
//	p.Restart(t)  // same address and store: clients reconnect
package pooltest

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/dispatch"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
	"github.com/toolpool/toolpool/pkg/worker"
)

// Pool is a running toolpool.
type Pool struct {
	// Srv is the embedded server; Restart replaces it.
	Srv *jetstream.Embedded
	// NC and JS are the dispatcher's connection.
	NC *nats.Conn
	JS js.JetStream
	// Reg holds the demo tools; the worker serves them and the dispatcher's
	// catalog is made of them.
	Reg *tools.Registry
	// D is the started dispatcher.
	D *dispatch.Dispatcher
	// Worker serves Reg on a connection of its own.
	Worker *worker.Worker

	listen  string // host:port of the server
	dataDir string
}

// Start starts a pool. mods may change the dispatcher's config before it is
// created (e.g. a short PublishTimeout for outage tests).
func Start(t testing.TB, mods ...func(*dispatch.Config)) *Pool {
	t.Helper()
	srv, nc, j := natstest.StartProvisioned(t)
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatalf("pooltest: %v", err)
	}
	p := &Pool{Srv: srv, NC: nc, JS: j, Reg: tools.NewRegistry(), listen: u.Host, dataDir: filepath.Dir(srv.StoreDir())}
	// Registered before the worker's and the dispatcher's cleanups, so it
	// runs after them: they stop while the (possibly restarted) server is up.
	t.Cleanup(func() { p.Srv.Shutdown() })
	if err := demo.Register(p.Reg); err != nil {
		t.Fatalf("pooltest: %v", err)
	}

	wnc := natstest.Connect(t, srv.ClientURL())
	wjs, err := js.New(wnc)
	if err != nil {
		t.Fatalf("pooltest: %v", err)
	}
	w, err := worker.New(worker.Config{
		JetStream:      wjs,
		Registry:       p.Reg,
		Logger:         natstest.Logger(t),
		DrainTimeout:   5 * time.Second,
		PublishTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("pooltest: worker.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatalf("pooltest: worker Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Logf("pooltest: worker Stop: %v", err)
		}
	})
	p.Worker = w

	cfg := dispatch.Config{JS: j, Catalog: dispatch.RegistryCatalog(p.Reg), Logger: natstest.Logger(t)}
	for _, m := range mods {
		m(&cfg)
	}
	d, err := dispatch.New(cfg)
	if err != nil {
		t.Fatalf("pooltest: dispatch.New: %v", err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatalf("pooltest: dispatcher Start: %v", err)
	}
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	p.D = d
	return p
}

// Stop shuts the NATS server down. The connections keep trying to
// reconnect.
func (p *Pool) Stop() { p.Srv.Shutdown() }

// Restart starts a new server on the address and store of the old one
// (shut down by Stop, or here if it still runs); the connections of the
// dispatcher and the worker reconnect to it.
func (p *Pool) Restart(t testing.TB) {
	t.Helper()
	p.Srv.Shutdown()
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{
		Listen:  p.listen,
		DataDir: p.dataDir,
		Logger:  natstest.Logger(t),
	})
	if err != nil {
		t.Fatalf("pooltest: restart: %v", err)
	}
	p.Srv = srv // shut down by the cleanup Start registered
}
