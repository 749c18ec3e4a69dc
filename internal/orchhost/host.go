// Package orchhost is what an orchestrator process is, assembled: the live
// catalog of tools, the dispatcher that publishes calls and waits for
// their results, the poison watcher, and the front doors (the HTTP API,
// the MCP server, the operators' console) with their metrics and health.
// The root package's toolpool.Orchestrator wraps it; the module's tests
// and the bench assemble pools with it (internal/pooltest), reaching the
// dispatcher and the packages' own configs, which the root does not
// expose.
//
// It spans the sides (orchestrator, front, fleet, and the worker side's
// attempt history), so it lives beside them, not under one.
package orchhost

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/backlog"
	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/front/mcpfront"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// StartTimeoutDefault bounds each of Start's steps when the ctx given to
// Start has no deadline of its own.
const StartTimeoutDefault = 30 * time.Second

// Host serves agents: it keeps the live catalog of tools, publishes calls
// and waits for their results (the dispatcher), sets poison calls aside,
// and serves the HTTP API and the MCP server (Handler). Create it with
// New, then Start and Stop it.
type Host struct {
	startstop.Base
	cfg     Config
	js      js.JetStream
	d       *dispatch.Dispatcher
	gate    *policy.Gate // in front of d: the result cache, approvals, budgets (policy.go)
	pol     policyParts  // the gate's stores
	api     *httpapi.Handler
	m       *metrics.Dispatch
	httpM   *metrics.HTTP
	front   *metrics.Front
	live    *discovery.Catalog // nil with a Catalog of the config's
	mcp     *mcpfront.Server
	ui      *console.Console            // nil without Config.Console
	backlog *backlog.Monitor            // the backlog and its history (backlog.go)
	poison  *dlq.PoisonWatcher          // set by Start, read by Stop's drain
	tasks   atomic.Pointer[tasks.Store] // opened by Start: the durable tasks (tasks.go)
	jsOK    []health.Check              // readiness's JetStream checks, run in the background
}

// New returns a Host for cfg, with defaults applied. It does not touch
// the network: Start does.
func New(cfg Config) (*Host, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Publishes wait for JetStream's acknowledgement longer than the
	// client's default: a leader election can take that long.
	j, err := js.New(cfg.Conn, js.WithPublishAsyncTimeout(dispatch.PublishAsyncTimeout))
	if err != nil {
		return nil, fmt.Errorf("orchhost: JetStream context: %w", err)
	}
	h := &Host{cfg: cfg, js: j}
	h.jsOK = []health.Check{health.Background(health.Streams(j), 0), health.Background(health.StoreWritable(j), 0)}
	if err := h.newMetrics(); err != nil {
		return nil, err
	}
	if err := h.newDispatcher(); err != nil {
		return nil, err
	}
	if err := h.newBacklog(); err != nil {
		return nil, err
	}
	if err := h.newFronts(); err != nil {
		return nil, err
	}
	return h, nil
}

// newMetrics registers the dispatcher's, the HTTP server's and the front
// doors' metrics, and the pool's state read from JetStream at scrape time.
func (h *Host) newMetrics() (err error) {
	reg := h.cfg.Metrics
	if h.m, err = metrics.NewDispatch(reg, metrics.DispatchOptions{}); err != nil {
		return err
	}
	if h.httpM, err = metrics.NewHTTP(reg); err != nil {
		return err
	}
	if h.front, err = metrics.NewFront(reg); err != nil {
		return err
	}
	return reg.Register(metrics.NewJetStreamCollector(h.js, metrics.JetStreamOptions{Logger: h.cfg.Logger, DeadLetters: dlq.Counts}))
}

// newDispatcher makes the live catalog (unless the config gives one) and
// the dispatcher, with its scheduler's state at scrape time.
func (h *Host) newDispatcher() (err error) {
	dc := h.cfg.Dispatch
	dc.NC, dc.JS, dc.Metrics, dc.Logger = h.cfg.Conn, h.js, h.m, h.cfg.Logger
	dc.Tracer = h.cfg.Tracer
	dc.OnResult = h.observeResult // the backlog's history (backlog.go)
	dc.Catalog = h.cfg.Catalog
	if dc.Catalog == nil {
		if h.live, err = discovery.NewCatalog(discovery.CatalogConfig{JetStream: h.js, Bucket: h.cfg.Discovery, Logger: h.cfg.Logger}); err != nil {
			return err
		}
		dc.Catalog = h.live
	}
	if h.d, err = dispatch.New(dc); err != nil {
		return err
	}
	if err := h.newGate(dc.Catalog); err != nil {
		return err
	}
	// Tenants labelled by the API keys' (the rest summed as "other").
	sc := metrics.NewSchedCollector(h.d.SchedSnapshot, metrics.SchedOptions{Tenants: h.cfg.API.Keys.Tenants()})
	return h.cfg.Metrics.Register(sc)
}

// newFronts makes the HTTP API, the MCP server and, when configured, the
// console.
func (h *Host) newFronts() (err error) {
	ac := h.cfg.API
	ac.Dispatcher, ac.Metrics, ac.Logger = h.gate, h.front, h.cfg.Logger
	ac.Tracer = h.cfg.Tracer
	ac.Tasks = hostTasks{h}
	ac.Definitions = httpapi.DefinitionsFunc(func(ctx context.Context) ([]tools.Definition, error) {
		return h.Definitions(ctx), nil
	})
	if h.api, err = httpapi.New(ac); err != nil {
		return err
	}
	mc := h.cfg.MCP
	mc.Dispatcher, mc.Tools, mc.Logger = h, h.mcpTools, h.cfg.Logger
	mc.Tracer = h.cfg.Tracer
	mc.Tasks = hostTasks{h}
	if mc.Keys == nil {
		mc.Keys = h.cfg.API.Keys
	}
	if h.live != nil {
		mc.Subscribe = h.live.Subscribe
	}
	if h.cfg.MCPAskHosts && mc.HostApprovals == nil {
		mc.HostApprovals = mcpfront.HostApprovalsFunc(func(ctx context.Context, id string, ok bool, by, reason string) error {
			_, err := h.pol.approvals.Decide(ctx, id, ok, by, reason, approval.ViaMCP)
			return err
		})
	}
	if mc.LoadSessionKey == nil && len(mc.SessionKey) == 0 {
		mc.LoadSessionKey = func(ctx context.Context) ([]byte, error) { return mcpSessionKeyFrom(ctx, h.js, h.cfg.Replicas) }
	}
	if h.mcp, err = mcpfront.New(mc); err != nil {
		return err
	}
	if h.cfg.Console == nil {
		return nil
	}
	uc := *h.cfg.Console
	uc.Conn, uc.JetStream, uc.Live, uc.Logger = h.cfg.Conn, h.js, h.live, h.cfg.Logger
	uc.Checks = h.checks()
	uc.Attempts = h.cfg.History // a call's page reads its attempts there
	uc.Tracer = h.cfg.Tracer    // its replays' spans
	if h.backlog != nil {
		uc.Backlog = h.backlog // the overview's backlog states and the charts
	}
	// The Approvals page and the overview's budgets and cache column.
	uc.Approvals, uc.Budgets, uc.CacheCounts = h.pol.approvals, h.pol.budgets, h.pol.cacheM.ByTool
	if uc.Snapshot == nil {
		uc.Snapshot = h.fleetSchedSnapshot
	}
	h.ui, err = console.New(uc)
	return err
}

// Start opens the attempt history, starts the poison watcher and the live
// catalog, then the dispatcher and the front doors. The streams must
// exist. It returns once calls can be dispatched, or with the first error
// (what was started is stopped again). Requests are bounded by ctx, or,
// when ctx has no deadline, by StartTimeoutDefault for each step (the
// history, the poison watcher, the catalog and the dispatcher); a Stop
// during Start ends them.
func (h *Host) Start(ctx context.Context) error {
	err := h.Base.Start(ctx, func(life context.Context) (err error) {
		ctx, cancel := context.WithCancel(ctx)
		defer context.AfterFunc(life, cancel)()
		defer cancel()
		defer func() {
			if err != nil {
				_ = h.stopAll(context.Background())
			}
		}()
		if err := h.startPoisonWatcher(ctx); err != nil {
			return err
		}
		return h.startServing(ctx)
	})
	if errors.Is(err, startstop.ErrStarted) || errors.Is(err, startstop.ErrStopped) {
		return fmt.Errorf("orchhost: %w", err)
	}
	return err
}

// startPoisonWatcher opens the attempt history (best effort) and starts
// the poison watcher, unless the config says not to.
func (h *Host) startPoisonWatcher(ctx context.Context) error {
	if h.cfg.NoPoisonWatcher {
		return nil
	}
	pc := dlq.PoisonConfig{Conn: h.cfg.Conn, JetStream: h.js, Logger: h.cfg.Logger, OnPoison: h.m.PoisonCall}
	hctx, cancel := startContext(ctx) // a bound of its own: the history is best effort
	hist, err := settle.OpenHistory(hctx, h.js, h.cfg.History)
	cancel()
	if err != nil {
		h.cfg.Logger.Warn("no attempt history: dead letters will carry only their last attempt", "err", err)
	} else {
		pc.History = hist
	}
	if h.poison, err = dlq.NewPoisonWatcher(pc); err != nil {
		return err
	}
	pctx, cancel := startContext(ctx)
	defer cancel()
	return h.poison.Start(pctx)
}

// startServing starts the live catalog, the dispatcher, the console and
// the MCP server.
func (h *Host) startServing(ctx context.Context) error {
	ctx, cancel := startContext(ctx)
	defer cancel()
	if h.live != nil {
		if err := h.live.Start(ctx); err != nil {
			return err
		}
	}
	if err := h.d.Start(ctx); err != nil {
		return err
	}
	if err := h.startPolicy(ctx); err != nil {
		return err
	}
	if err := h.openTasks(ctx); err != nil {
		return err
	}
	if err := h.backlog.Start(ctx); err != nil {
		return err
	}
	if h.ui != nil {
		if err := h.ui.Start(ctx); err != nil {
			return err
		}
	}
	return h.mcp.Start(ctx)
}

// Stop stops the front doors and the dispatcher — the turns in progress
// may finish until ctx is done, then the rest fail with
// dispatch.ErrStopped — then the live catalog and the poison watcher. It
// returns nil when every turn ended in time. It is idempotent.
func (h *Host) Stop(ctx context.Context) error {
	return h.Base.Stop(ctx, dispatch.ErrStopped, h.stopAll)
}

// stopAll stops what Start started.
func (h *Host) stopAll(ctx context.Context) error {
	err := h.mcp.Stop(ctx)
	if h.ui != nil {
		err = errors.Join(err, h.ui.Stop(ctx))
	}
	err = errors.Join(err, h.backlog.Stop(ctx))
	if t := h.tasks.Load(); t != nil { // before the dispatcher: its tasks are handed over
		err = errors.Join(err, t.Stop(ctx))
	}
	err = errors.Join(err, h.d.Stop(ctx), h.stopPolicy(ctx))
	if h.live != nil {
		_ = h.live.Stop(context.WithoutCancel(ctx))
	}
	if h.poison != nil {
		err = errors.Join(err, h.poison.Stop(ctx))
	}
	return err
}

// Dispatch publishes the tool calls of one assistant turn and returns
// their results in the calls' order (see dispatch.Dispatcher.Dispatch),
// after the result cache, the approval gates and the budgets had their
// say (policy.Gate).
func (h *Host) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	return h.gate.Dispatch(ctx, session, calls)
}

// MCP is the Host's MCP server: Handler serves it on /mcp; ServeStdio
// serves it on a host's pipes (orchestrator mcp).
func (h *Host) MCP() *mcpfront.Server { return h.mcp }

// Dispatcher is the Host's dispatcher.
func (h *Host) Dispatcher() *dispatch.Dispatcher { return h.d }

// Instance is the id in this orchestrator's result subjects.
func (h *Host) Instance() string { return h.d.Instance() }

// Metrics is the registry the Host's metrics are in.
func (h *Host) Metrics() *metrics.Registry { return h.cfg.Metrics }

// APIKeys are the HTTP API's keys (nil without keys).
func (h *Host) APIKeys() *apikey.Set { return h.cfg.API.Keys }

// Definitions are the tools live workers serve, in the Anthropic tools
// format; with a Catalog of the config's, those of a catalog that lists
// definitions (none otherwise).
func (h *Host) Definitions(ctx context.Context) []tools.Definition {
	var c dispatch.Catalog = h.cfg.Catalog
	if h.live != nil {
		c = h.live
	}
	if d, ok := c.(interface {
		Definitions(context.Context) []tools.Definition
	}); ok {
		return d.Definitions(ctx)
	}
	return nil
}

// startContext bounds ctx by StartTimeoutDefault when it has no deadline.
func startContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, StartTimeoutDefault)
}
