package toolpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/front/mcpfront"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// OrchestratorConfig configures an Orchestrator. Zero fields take the
// documented defaults (WithDefaults); Validate names the field that is
// wrong.
type OrchestratorConfig struct {
	// Conn is the NATS connection. Required. The Orchestrator does not
	// close it.
	Conn *nats.Conn
	// Replicas of the buckets the Orchestrator creates when they are
	// missing, unless History or Discovery name their own: 1 on one
	// server, 3 on a cluster, as the streams (Provision). Default 1.
	Replicas int
	// Dispatch is the dispatcher's configuration: Instance (default
	// random), DefaultTimeout, PublishRetryFor, admission limits and the
	// rest, with package dispatch's defaults. Its NC, JS, Catalog, Metrics
	// and Logger are set by the Orchestrator.
	Dispatch dispatch.Config
	// Catalog says which tools exist and who serves them. Default: the
	// live catalog of the workers' announcements (package discovery) in
	// the Discovery bucket.
	Catalog dispatch.Catalog
	// Discovery is the bucket of the workers' announcements that the live
	// catalog watches.
	Discovery discovery.BucketConfig
	// History is the attempts bucket the poison watcher reads, opened (or
	// created) at Start. Best effort, as for Server.
	History settle.HistoryConfig
	// NoPoisonWatcher runs without the poison watcher, which sets aside
	// (dead-letters) a call that stops every worker running it.
	NoPoisonWatcher bool
	// API is the HTTP API's configuration (Handler): API keys, body and
	// timeout limits. Its Dispatcher, Definitions, Metrics and Logger are
	// set by the Orchestrator.
	API httpapi.Config
	// MCP is the MCP server's configuration (Handler's /mcp, and MCP for
	// stdio): its bearer Token and limits. Its Dispatcher, Tools,
	// Subscribe and Logger are set by the Orchestrator; its Keys default to
	// API.Keys, so an API key works on /mcp as on /v1/.
	MCP mcpfront.Config
	// Console, when set, is the operators' web console's configuration:
	// Handler serves it at /ui (package console). Its Conn, JetStream,
	// Live, Checks and Logger are set by the Orchestrator, and its
	// Snapshot, when nil, to the dispatcher's scheduler; nil: no /ui.
	Console *console.Config
	// Checks are more readiness checks for Handler's /readyz, e.g. those
	// of a Server in the same process (Server.Checks).
	Checks []health.Check
	// Metrics is the registry the Orchestrator's metrics are registered
	// in, with the pool's state read from JetStream at scrape time.
	// Default: a registry of its own. Handler serves it.
	Metrics *metrics.Registry
	// Logger receives the Orchestrator's logs. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c OrchestratorConfig) WithDefaults() OrchestratorConfig {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Replicas = cmp.Or(c.Replicas, jetstream.ReplicasDefault)
	c.History.Replicas = cmp.Or(c.History.Replicas, c.Replicas)
	c.Discovery.Replicas = cmp.Or(c.Discovery.Replicas, c.Replicas)
	if c.Metrics == nil {
		c.Metrics = metrics.NewRegistry()
	}
	return c
}

// Validate reports the first field of c that is wrong, by name.
func (c OrchestratorConfig) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("toolpool: OrchestratorConfig.Conn is required")
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("toolpool: OrchestratorConfig.Replicas must be 1 to 5, got %d", c.Replicas)
	}
	return nil
}

// Orchestrator is what serves agents: it keeps the live catalog of tools,
// publishes calls and waits for their results (the dispatcher), sets
// poison calls aside, and serves the HTTP API (Handler). Create it with NewOrchestrator, then Start and Stop it.
type Orchestrator struct {
	cfg   OrchestratorConfig
	js    js.JetStream
	d     *dispatch.Dispatcher
	api   *httpapi.Handler
	m     *metrics.Dispatch
	httpM *metrics.HTTP
	front *metrics.Front
	live  *discovery.Catalog // nil with a Catalog of the config's
	mcp   *mcpfront.Server
	ui    *console.Console // nil without OrchestratorConfig.Console

	mu       sync.Mutex
	started  bool
	poison   *dlq.PoisonWatcher
	stopOnce sync.Once
	stopped  chan struct{}
	stopErr  error
}

// NewOrchestrator returns an Orchestrator for cfg, with defaults applied.
// It does not touch the network: Start does.
func NewOrchestrator(cfg OrchestratorConfig) (*Orchestrator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Publishes wait for JetStream's acknowledgement longer than the
	// client's default: a leader election can take that long.
	j, err := js.New(cfg.Conn, js.WithPublishAsyncTimeout(dispatch.PublishAsyncTimeout))
	if err != nil {
		return nil, fmt.Errorf("toolpool: JetStream context: %w", err)
	}
	o := &Orchestrator{cfg: cfg, js: j, stopped: make(chan struct{})}
	if o.m, err = metrics.NewDispatch(cfg.Metrics, metrics.DispatchOptions{}); err != nil {
		return nil, err
	}
	if o.httpM, err = metrics.NewHTTP(cfg.Metrics); err != nil {
		return nil, err
	}
	if o.front, err = metrics.NewFront(cfg.Metrics); err != nil {
		return nil, err
	}
	if err := cfg.Metrics.Register(metrics.NewJetStreamCollector(j, metrics.JetStreamOptions{Logger: cfg.Logger, DeadLetters: dlq.Counts})); err != nil {
		return nil, err
	}
	dc := cfg.Dispatch
	dc.NC, dc.JS, dc.Metrics, dc.Logger = cfg.Conn, j, o.m, cfg.Logger
	dc.Catalog = cfg.Catalog
	if dc.Catalog == nil {
		if o.live, err = discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Bucket: cfg.Discovery, Logger: cfg.Logger}); err != nil {
			return nil, err
		}
		dc.Catalog = o.live
	}
	if o.d, err = dispatch.New(dc); err != nil {
		return nil, err
	}
	// The scheduler's state at scrape time, tenants labelled by the API
	// keys' (the rest summed as "other").
	sc := metrics.NewSchedCollector(o.d.SchedSnapshot, metrics.SchedOptions{Tenants: cfg.API.Keys.Tenants()})
	if err := cfg.Metrics.Register(sc); err != nil {
		return nil, err
	}
	ac := cfg.API
	ac.Dispatcher, ac.Metrics, ac.Logger = o.d, o.front, cfg.Logger
	ac.Definitions = httpapi.DefinitionsFunc(func(ctx context.Context) ([]tools.Definition, error) {
		return o.Definitions(ctx), nil
	})
	if o.api, err = httpapi.New(ac); err != nil {
		return nil, err
	}
	mc := cfg.MCP
	mc.Dispatcher, mc.Tools, mc.Logger = o, o.mcpTools, cfg.Logger
	if mc.Keys == nil {
		mc.Keys = cfg.API.Keys
	}
	if o.live != nil {
		mc.Subscribe = o.live.Subscribe
	}
	if o.mcp, err = mcpfront.New(mc); err != nil {
		return nil, err
	}
	if cfg.Console != nil {
		uc := *cfg.Console
		uc.Conn, uc.JetStream, uc.Live, uc.Logger = cfg.Conn, j, o.live, cfg.Logger
		uc.Checks = o.checks()
		if uc.Snapshot == nil {
			uc.Snapshot = o.fleetSchedSnapshot
		}
		if o.ui, err = console.New(uc); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// mcpTools are the live tools for the MCP server, with the hints the
// announcements carry.
func (o *Orchestrator) mcpTools(ctx context.Context) []mcpfront.Tool {
	if o.live != nil {
		anns := o.live.Tools(ctx)
		out := make([]mcpfront.Tool, len(anns))
		for i, a := range anns {
			out[i] = mcpfront.Tool{Definition: a.Tool, Idempotent: a.Idempotent}
			if a.Hints != nil {
				out[i].Hints = *a.Hints
			}
		}
		return out
	}
	defs := o.Definitions(ctx)
	out := make([]mcpfront.Tool, len(defs))
	for i, d := range defs {
		out[i] = mcpfront.Tool{Definition: d}
	}
	return out
}

// Start opens the attempt history, starts the poison watcher and the live
// catalog, then the dispatcher. The streams must exist (Provision). It returns
// once calls can be dispatched, or with the first error (what was started
// is stopped again). Requests are bounded by ctx, or, when ctx has no
// deadline, by StartTimeoutDefault for each step (the history, the poison
// watcher, the catalog and the dispatcher).
func (o *Orchestrator) Start(ctx context.Context) (err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started {
		return errors.New("toolpool: orchestrator: already started")
	}
	o.started = true
	defer func() {
		if err != nil {
			_ = o.stopAll(context.Background())
		}
	}()
	if !o.cfg.NoPoisonWatcher {
		pc := dlq.PoisonConfig{Conn: o.cfg.Conn, JetStream: o.js, Logger: o.cfg.Logger, OnPoison: o.m.PoisonCall}
		hctx, cancel := startContext(ctx) // a bound of its own: the history is best effort
		h, err := settle.OpenHistory(hctx, o.js, o.cfg.History)
		cancel()
		if err != nil {
			o.cfg.Logger.Warn("no attempt history: dead letters will carry only their last attempt", "err", err)
		} else {
			pc.History = h
		}
		if o.poison, err = dlq.NewPoisonWatcher(pc); err != nil {
			return err
		}
		pctx, cancel := startContext(ctx)
		err = o.poison.Start(pctx)
		cancel()
		if err != nil {
			return err
		}
	}
	ctx, cancel := startContext(ctx)
	defer cancel()
	if o.live != nil {
		if err := o.live.Start(ctx); err != nil {
			return err
		}
	}
	if err := o.d.Start(ctx); err != nil {
		return err
	}
	if o.ui != nil {
		if err := o.ui.Start(ctx); err != nil {
			return err
		}
	}
	return o.mcp.Start(ctx)
}

// Stop stops the dispatcher — the turns in progress may finish until ctx
// is done, then the rest fail with dispatch.ErrStopped — then the live
// catalog and the poison watcher. It returns nil when every turn ended in
// time. It is idempotent.
func (o *Orchestrator) Stop(ctx context.Context) error {
	o.stopOnce.Do(func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.stopErr = o.stopAll(ctx)
		close(o.stopped)
	})
	return o.stopErr
}

func (o *Orchestrator) stopAll(ctx context.Context) error {
	err := o.mcp.Stop(ctx)
	if o.ui != nil {
		err = errors.Join(err, o.ui.Stop(ctx))
	}
	err = errors.Join(err, o.d.Stop(ctx))
	if o.live != nil {
		_ = o.live.Stop(context.WithoutCancel(ctx))
	}
	if o.poison != nil {
		err = errors.Join(err, o.poison.Stop(ctx))
	}
	return err
}

// Stopped is closed once Stop has returned.
func (o *Orchestrator) Stopped() <-chan struct{} { return o.stopped }

// Dispatch publishes the tool calls of one assistant turn and returns
// their results in the calls' order (see dispatch.Dispatcher.Dispatch).
func (o *Orchestrator) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	return o.d.Dispatch(ctx, session, calls)
}

// MCP is the Orchestrator's MCP server: Handler serves it on /mcp;
// ServeStdio serves it on a host's pipes (orchestrator mcp).
func (o *Orchestrator) MCP() *mcpfront.Server { return o.mcp }

// Dispatcher is the Orchestrator's dispatcher.
func (o *Orchestrator) Dispatcher() *dispatch.Dispatcher { return o.d }

// Instance is the id in this orchestrator's result subjects.
func (o *Orchestrator) Instance() string { return o.d.Instance() }

// Metrics is the registry the Orchestrator's metrics are in.
func (o *Orchestrator) Metrics() *metrics.Registry { return o.cfg.Metrics }

// Definitions are the tools live workers serve, in the Anthropic tools
// format; with a Catalog of the config's, those of a catalog that lists
// definitions (none otherwise).
func (o *Orchestrator) Definitions(ctx context.Context) []tools.Definition {
	var c dispatch.Catalog = o.cfg.Catalog
	if o.live != nil {
		c = o.live
	}
	if d, ok := c.(interface {
		Definitions(context.Context) []tools.Definition
	}); ok {
		return d.Definitions(ctx)
	}
	return nil
}

// Handler serves the agent API (POST /v1/tool_calls, GET /v1/tools: package
// httpapi), the MCP server on /mcp (streamable HTTP: package mcpfront),
// the operators' console on /ui with OrchestratorConfig.Console,
// GET /metrics, GET /healthz (503 once the NATS connection is
// closed for good) and GET /readyz (NATS connected, streams present, the
// store takes a write, OrchestratorConfig.Checks and extra), counting
// requests by route. Put it behind an httpapi.Server (NewHTTPServer) for
// API keys, browser and host checks and limits.
func (o *Orchestrator) Handler(extra ...health.Check) http.Handler {
	mux := http.NewServeMux()
	checks := append(o.checks(), extra...)
	health.New(0, checks...).WithLiveness(health.NATSNotClosed(o.cfg.Conn)).Register(mux)
	// The API's endpoints have patterns of their own so that metrics label
	// requests by them.
	mux.Handle(httpapi.PathToolCalls, o.api)
	mux.Handle(httpapi.PathTools, o.api)
	mux.Handle("/v1/", o.api)
	mux.Handle(mcpfront.Path, o.mcp.Handler())
	mux.Handle("GET /metrics", metrics.Handler(o.cfg.Metrics))
	if o.ui != nil {
		mux.Handle(console.Path, o.ui.Handler())
		mux.Handle("GET /ui", http.RedirectHandler(console.Path, http.StatusSeeOther))
	}
	return o.httpM.Wrap(mux)
}

// checks are /readyz's checks but for Handler's extra ones: the config's,
// NATS connected, the streams present, the store writable.
func (o *Orchestrator) checks() []health.Check {
	return append(append([]health.Check(nil), o.cfg.Checks...),
		health.NATSConnected(o.cfg.Conn), health.Streams(o.js), health.StoreWritable(o.js))
}

// NewHTTPServer is the HTTP server of Handler: cfg's Handler, Metrics and
// Logger are set here, and /readyz fails once the server drains. Start it
// after Start, and Stop it before Stop (and before the Servers of this
// process), so that the requests in flight get their results.
func (o *Orchestrator) NewHTTPServer(cfg httpapi.ServerConfig) (*httpapi.Server, error) {
	var srv *httpapi.Server
	ready := health.Check{Name: "http", Func: func(ctx context.Context) error { return srv.Ready(ctx) }}
	cfg.Handler, cfg.Metrics, cfg.Logger = o.Handler(ready), o.front, o.cfg.Logger
	srv, err := httpapi.NewServer(cfg)
	if err != nil {
		return nil, err
	}
	return srv, nil
}

// fleetSchedSnapshot is the schedulers' state summed over every
// orchestrator that answers on jetstream.SchedStatsSubject (the calls
// waiting on a limit are each replica's own), or this one's alone when
// none answers in time: what the console shows.
func (o *Orchestrator) fleetSchedSnapshot() sched.Snapshot {
	ctx, cancel := context.WithTimeout(context.Background(), fleetSnapshotWait)
	defer cancel()
	snaps, err := ops.SchedStats(ctx, o.cfg.Conn, ops.SchedStatsOptions{Window: fleetSnapshotWait, Idle: fleetSnapshotIdle})
	if err != nil || len(snaps) == 0 {
		return o.d.SchedSnapshot()
	}
	return sched.Merge(snaps)
}

// How long the console's overview waits for the orchestrators' snapshots:
// they answer within a millisecond or two on a healthy connection.
const (
	fleetSnapshotWait = 250 * time.Millisecond
	fleetSnapshotIdle = 25 * time.Millisecond
)
