// Package pooltest starts a whole toolpool inside a test, assembled by the
// hosts the root package wraps (internal/worker/host, internal/orchhost),
// so that tests reach what the root does not expose (the dispatcher, the
// workers, the packages' own configs): an embedded JetStream server with
// the streams provisioned (internal/natstest), a worker host serving the
// demo tools echo, sleep and flaky on a connection of its own, and a
// started orchestrator host whose catalog is the worker's registry.
// Everything stops when the test ends. StartServer and StartOrchestrator
// are the pieces, for tests that assemble pools of their own.
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

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchhost"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/host"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// The hosts a pool is made of, and their configs: what toolpool.Server
// and toolpool.Orchestrator wrap.
type (
	// Server is a worker host (toolpool.Server's).
	Server = host.Host
	// ServerConfig is a worker host's config.
	ServerConfig = host.Config
	// Orchestrator is an orchestrator host (toolpool.Orchestrator's).
	Orchestrator = orchhost.Host
	// OrchestratorConfig is an orchestrator host's config.
	OrchestratorConfig = orchhost.Config
)

// Pool is a running toolpool.
type Pool struct {
	// Srv is the embedded server; Restart replaces it.
	Srv *embedded.Server
	// NC and JS are the dispatcher's connection.
	NC *nats.Conn
	JS js.JetStream
	// Reg holds the demo tools; the worker serves them and the dispatcher's
	// catalog is made of them.
	Reg *tools.Registry
	// Orch is the started orchestrator; D is its dispatcher.
	Orch *Orchestrator
	D    *dispatch.Dispatcher
	// Server runs Worker, which serves Reg on a connection of its own.
	Server *Server
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
	p.Server = StartServer(t, srv.ClientURL(), p.Reg)
	p.Worker = p.Server.Workers()[0]
	p.Orch = StartOrchestrator(t, nc, discovery.RegistryCatalog(p.Reg), func(c *OrchestratorConfig) {
		for _, m := range mods {
			m(&c.Dispatch)
		}
	})
	p.D = p.Orch.Dispatcher()
	return p
}

// StartServer starts a worker host serving reg on a new connection to
// url, as tests want it: no announcements (the orchestrator's catalog is
// the registry), no attempt history, five-second drain and publish
// timeouts, logs to the test. mods may change the config. It is stopped
// when the test ends; a stop that does not finish cleanly is logged, not
// failed (a test may have killed its connection on purpose).
func StartServer(t testing.TB, url string, reg *tools.Registry, mods ...func(*ServerConfig)) *Server {
	t.Helper()
	cfg := ServerConfig{
		Conn: natstest.Connect(t, url), Registry: reg, NoAnnounce: true, NoHistory: true,
		Worker: worker.Config{DrainTimeout: 5 * time.Second, PublishTimeout: 5 * time.Second},
		Logger: natstest.Logger(t),
	}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := host.New(cfg)
	if err != nil {
		t.Fatalf("pooltest: host.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("pooltest: server Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Logf("pooltest: server Stop: %v", err)
		}
	})
	return s
}

// StartOrchestrator starts an orchestrator host on nc whose catalog is
// cat, without a poison watcher, logging to the test; mods may change the
// config. It is stopped (at once: turns still waiting fail) when the test
// ends.
func StartOrchestrator(t testing.TB, nc *nats.Conn, cat dispatch.Catalog, mods ...func(*OrchestratorConfig)) *Orchestrator {
	t.Helper()
	cfg := OrchestratorConfig{Conn: nc, Catalog: cat, NoPoisonWatcher: true, Logger: natstest.Logger(t)}
	for _, m := range mods {
		m(&cfg)
	}
	o, err := orchhost.New(cfg)
	if err != nil {
		t.Fatalf("pooltest: orchhost.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a cluster may be electing leaders
	defer cancel()
	if err := o.Start(ctx); err != nil {
		t.Fatalf("pooltest: orchestrator Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = o.Stop(ctx)
	})
	return o
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
	srv, err := embedded.Start(embedded.Options{
		Listen:  p.listen,
		DataDir: p.dataDir,
		Logger:  natstest.Logger(t),
	})
	if err != nil {
		t.Fatalf("pooltest: restart: %v", err)
	}
	p.Srv = srv // shut down by the cleanup Start registered
}
