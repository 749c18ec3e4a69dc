// Package host is what a worker process is, assembled: workers that pull
// the calls of a registry's tools from JetStream, execute them and publish
// their results; the announcements that route calls to them; the attempt
// history that dead letters carry; a catalog's tools and MCP servers;
// their metrics and health. The root package's toolpool.Server wraps it,
// and the worker binary runs it directly, so that the worker links
// nothing of the orchestrator side.
//
//	h, err := host.New(host.Config{Conn: nc, Registry: reg})
//	err = h.Start(ctx)  // workers pulling, tools announced
//	…
//	err = h.Stop(ctx)   // drain until ctx ends, then hand the rest back
package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/catalog"
	"github.com/toolpool/toolpool/internal/worker/mcpback"
	"github.com/toolpool/toolpool/internal/worker/settle"
)

// Host is a worker process's workers, announcements, attempt history,
// catalog, metrics and health. Create it with New, then Start and Stop it.
type Host struct {
	startstop.Base
	cfg        Config
	js         js.JetStream
	metrics    *metrics.Worker
	mcpMetrics mcpback.Metrics // nil without MCP servers
	mcpChecks  []health.Check
	jsOK       [2]health.Check // the streams and consumers checks, run in the background
	ready      atomic.Bool
	mcp        atomic.Pointer[mcpback.Set] // the catalog's MCP servers, once started

	mu         sync.Mutex
	workers    []*worker.Worker
	announcers []*discovery.Announcer
	closed     bool            // the workers are stopped: Serve refuses
	withheld   map[string]bool // tools of the registry not served (Unserve)
	// served are servedNames as of the last Start, Serve or Unserve: what
	// the readiness probe checks, without waiting for h.mu (held by Serve
	// while it binds consumers).
	served atomic.Pointer[[]string]
}

// New returns a Host for cfg, with defaults applied, and the catalog's
// tools registered. It does not touch the network: Start does.
func New(cfg Config) (*Host, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	j, err := js.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("host: JetStream context: %w", err)
	}
	wc := cfg.Worker
	wc.JetStream, wc.Registry = j, cfg.Registry
	if err := wc.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("host: Config.Worker: %w", err)
	}
	h := &Host{cfg: cfg, js: j}
	var servers []string
	if cfg.Catalog != nil {
		if err := cfg.Catalog.Register(cfg.Registry); err != nil {
			return nil, err
		}
		servers = cfg.Catalog.MCPServers()
	}
	if len(cfg.Registry.Names()) == 0 && !cfg.StartEmpty && len(servers) == 0 {
		return nil, ErrNoTools
	}
	if h.metrics, err = metrics.NewWorker(cfg.Metrics, metrics.WorkerOptions{Tools: cfg.Registry.Names()}); err != nil {
		return nil, fmt.Errorf("host: worker metrics: %w", err)
	}
	if len(servers) > 0 {
		if h.mcpMetrics, err = metrics.NewMCP(cfg.Metrics); err != nil {
			return nil, fmt.Errorf("host: MCP metrics: %w", err)
		}
		h.mcpChecks = mcpChecks(servers, h.mcp.Load)
	}
	h.noteServed()
	h.jsOK = [2]health.Check{health.Background(health.Streams(j), 0), health.Background(health.ConsumersOf(j, h.checkedNow), 0)}
	return h, nil
}

// Start starts the catalog's MCP servers (registering the tools of those
// that start), opens the attempt history, starts the workers and announces
// their tools; from then on it follows the MCP servers' tools (Serve,
// Unserve). It returns once every worker pulls, or with the first error
// (what was started is stopped again). Requests are bounded by ctx, or,
// when ctx has no deadline, by StartTimeoutDefault for the history and as
// much again for the workers; a Stop during Start ends them.
func (h *Host) Start(ctx context.Context) error {
	err := h.Base.Start(ctx, func(life context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer context.AfterFunc(life, cancel)()
		defer cancel()
		if err := h.start(ctx, life); err != nil {
			return err
		}
		if set := h.mcp.Load(); set != nil {
			set.Follow(h, h.cfg.Logger) // outside h.mu: it serves what changed meanwhile
		}
		return nil
	})
	if errors.Is(err, startstop.ErrStarted) || errors.Is(err, startstop.ErrStopped) {
		return fmt.Errorf("host: %w", err)
	}
	return err
}

// start does Start's work under h.mu; on an error it stops what it
// started.
func (h *Host) start(ctx, life context.Context) (err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() {
		if err != nil {
			h.stopAll(context.Background(), LostConnDrain)
		}
	}()
	if err := h.startMCP(life); err != nil {
		return err
	}
	history := h.openHistory(ctx)
	ctx, cancel := startContext(ctx)
	defer cancel()
	served := h.servedNames()
	for i := range h.cfg.Workers {
		w, err := h.startWorker(ctx, i, served, history)
		if err != nil {
			return err
		}
		h.workers = append(h.workers, w)
		if err := h.announce(ctx, w, served); err != nil {
			return err
		}
	}
	h.noteServed()
	h.ready.Store(true)
	h.cfg.Logger.Info("workers started", "workers", h.cfg.Workers, "tools", served)
	return nil
}

// startMCP starts the catalog's MCP servers, bounded by the Host's life
// (each has a start timeout of its own): a server that does not start is
// retried in the background.
func (h *Host) startMCP(life context.Context) error {
	if h.mcpMetrics == nil {
		return nil
	}
	set, err := h.cfg.Catalog.startMCP(life, h.cfg.Registry, catalog.MCPOptions{Logger: h.cfg.Logger, Metrics: h.mcpMetrics})
	if err != nil {
		return err
	}
	h.mcp.Store(set)
	names := h.cfg.Registry.Names()
	h.metrics.AddTools(names...)
	if len(names) == 0 {
		h.cfg.Logger.Warn("no tools to serve yet: waiting for the catalog's MCP servers to come up")
	}
	return nil
}

// openHistory opens the attempts bucket unless the config gives a History
// or none; nil when it cannot be opened (logged).
func (h *Host) openHistory(ctx context.Context) worker.History {
	if h.cfg.Worker.History != nil || h.cfg.NoHistory {
		return h.cfg.Worker.History
	}
	// A bound of its own: a slow bucket must not eat the workers' time.
	hctx, cancel := startContext(ctx)
	defer cancel()
	hist, err := settle.OpenHistory(hctx, h.js, h.cfg.History)
	if err != nil {
		h.cfg.Logger.Warn("no attempt history: dead letters will carry only their last attempt", "err", err)
		return nil
	}
	return hist
}

// startWorker starts the i-th worker, serving served.
func (h *Host) startWorker(ctx context.Context, i int, served []string, history worker.History) (*worker.Worker, error) {
	wc := h.cfg.Worker
	wc.JetStream, wc.Registry, wc.History = h.js, h.cfg.Registry, history
	wc.Tools = served
	if wc.Metrics == nil {
		wc.Metrics = h.metrics
	}
	wc.Logger = cmp.Or(wc.Logger, h.cfg.Logger)
	if h.cfg.Workers > 1 {
		wc.Logger = wc.Logger.With("worker", i)
		if wc.WorkerID != "" {
			wc.WorkerID += "-" + strconv.Itoa(i)
		}
	}
	w, err := worker.New(wc)
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// announce announces the tools served by w, unless the config says not to.
func (h *Host) announce(ctx context.Context, w *worker.Worker, served []string) error {
	if h.cfg.NoAnnounce {
		return nil
	}
	a, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{
		JetStream: h.js, Registry: h.cfg.Registry, Tools: served, WorkerID: w.ID(), Bucket: h.cfg.Discovery, Logger: h.cfg.Logger,
		Slots: h.cfg.Worker.WithDefaults().Concurrency, // the fleet's slots, for the orchestrators' fair-share window
	})
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return fmt.Errorf("announcing the tools: %w", err)
	}
	h.announcers = append(h.announcers, a)
	return nil
}

// Stop withdraws the announcements (so that no new call is routed here),
// then stops the workers: the calls in flight may finish until ctx is
// done (or, when ctx has no deadline, for Config.Worker.DrainTimeout),
// then the rest are cancelled with worker.ErrShutdown and handed back to
// JetStream for another worker. With the NATS connection closed for good
// the calls get LostConnDrain at most. Then it stops the catalog's MCP
// servers and closes the catalog. Stop returns nil when every call
// finished in time. It is idempotent.
func (h *Host) Stop(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.cfg.Worker.WithDefaults().DrainTimeout)
		defer cancel()
	}
	err := h.Base.Stop(ctx, worker.ErrShutdown, func(ctx context.Context) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.ready.Store(false)
		h.closed = true
		err := h.stopAll(ctx, 0)
		if h.cfg.Catalog != nil {
			_ = h.cfg.Catalog.Close()
		}
		return err
	})
	if h.cfg.Catalog != nil {
		_ = h.cfg.Catalog.Close() // when Stop came before Start, or Start failed
	}
	return err
}

// stopAll stops what Start started; drain, when positive, caps how long
// the calls in flight may finish. h.mu is held.
func (h *Host) stopAll(ctx context.Context, drain time.Duration) error {
	for _, a := range h.announcers {
		actx, cancel := context.WithTimeout(ctx, WithdrawTimeoutDefault)
		if err := a.Stop(actx); err != nil {
			h.cfg.Logger.Warn("withdrawing the tools' announcements failed; they expire on their own", "err", err)
		}
		cancel()
	}
	if h.cfg.Conn.IsClosed() {
		drain = LostConnDrain
	}
	wctx := ctx
	if drain > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, drain)
		defer cancel()
	}
	errs := make([]error, len(h.workers))
	var wg sync.WaitGroup
	for i, w := range h.workers {
		wg.Go(func() { errs[i] = w.Stop(wctx) })
	}
	wg.Wait()
	if set := h.mcp.Load(); set != nil {
		// After the workers: the calls that drained could reach their servers.
		if err := set.Stop(context.WithoutCancel(ctx)); err != nil {
			h.cfg.Logger.Warn("stopping the catalog's MCP servers", "err", err)
		}
	}
	return errors.Join(errs...)
}

// Workers are the Host's workers, once started.
func (h *Host) Workers() []*worker.Worker {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*worker.Worker(nil), h.workers...)
}

// Conn is the connection the Host's workers use.
func (h *Host) Conn() *nats.Conn { return h.cfg.Conn }

// Checks are the Host's readiness checks: the consumers of the tools it
// serves at the time of the probe exist (not those Unserve withdrew), the
// workers are started and not draining (the consumers are looked up in
// the background: health.Background), and, as details that do not fail
// the probe, the catalog's MCP servers are up. Handler serves them with
// the connection's; an orchestrator in the same process adds them to its
// own.
func (h *Host) Checks() []health.Check {
	return append(h.ownChecks(), health.AsDetails(h.mcpChecks...)...)
}

func (h *Host) ownChecks() []health.Check {
	return []health.Check{
		h.jsOK[1],
		health.Flag("worker", &h.ready, "the worker is starting or draining"),
	}
}

// Handler serves GET /metrics (the Host's registry), GET /healthz (503
// once the NATS connection is closed for good) and GET /readyz (NATS
// connected, streams present, the Host's checks, its MCP servers up,
// Config.Checks; the streams and consumers are looked up in the
// background, see health.Background).
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(h.cfg.Metrics))
	checks := append([]health.Check{health.NATSConnected(h.cfg.Conn), h.jsOK[0]}, h.ownChecks()...)
	checks = append(append(checks, h.mcpChecks...), h.cfg.Checks...)
	health.New(0, checks...).WithLiveness(health.NATSNotClosed(h.cfg.Conn)).Register(mux)
	return mux
}

// startContext bounds ctx by StartTimeoutDefault when it has no deadline.
func startContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, StartTimeoutDefault)
}
