package orchhost

import (
	"context"
	"net/http"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/front/mcpfront"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
)

// mcpTools are the live tools for the MCP server, with the hints the
// announcements carry.
func (h *Host) mcpTools(ctx context.Context) []mcpfront.Tool {
	if h.live != nil {
		anns := h.live.Tools(ctx)
		out := make([]mcpfront.Tool, len(anns))
		for i, a := range anns {
			out[i] = mcpfront.Tool{Definition: a.Tool, Idempotent: a.Idempotent}
			if a.Hints != nil {
				out[i].Hints = *a.Hints
			}
		}
		return out
	}
	defs := h.Definitions(ctx)
	out := make([]mcpfront.Tool, len(defs))
	for i, d := range defs {
		out[i] = mcpfront.Tool{Definition: d}
	}
	return out
}

// Handler serves the agent API (POST /v1/tool_calls, GET /v1/tools: package
// httpapi), the MCP server on /mcp (streamable HTTP: package mcpfront),
// the operators' console on /ui with Config.Console,
// GET /metrics, GET /healthz (503 once the NATS connection is
// closed for good) and GET /readyz (NATS connected, streams present, the
// store takes a write, Config.Checks and extra; the streams and the store
// are checked in the background, see health.Background), counting
// requests by route. Put it behind an httpapi.Server (NewHTTPServer) for
// API keys, browser and host checks and limits.
func (h *Host) Handler(extra ...health.Check) http.Handler {
	mux := http.NewServeMux()
	checks := append(h.checks(), extra...)
	health.New(0, checks...).WithLiveness(health.NATSNotClosed(h.cfg.Conn)).Register(mux)
	// The API's endpoints have patterns of their own so that metrics label
	// requests by them.
	mux.Handle(httpapi.PathToolCalls, h.api)
	mux.Handle(httpapi.PathTools, h.api)
	mux.Handle(httpapi.PathToolCalls+"/", h.api) // async calls: /v1/tool_calls/{id}
	mux.Handle("/v1/", h.api)
	mux.Handle(mcpfront.Path, h.mcp.Handler())
	mux.Handle("GET /metrics", metrics.Handler(h.cfg.Metrics))
	if h.ui != nil {
		mux.Handle(console.Path, h.ui.Handler())
		mux.Handle("GET /ui", http.RedirectHandler(console.Path, http.StatusSeeOther))
	}
	return h.httpM.Wrap(mux)
}

// checks are /readyz's checks but for Handler's extra ones: the config's,
// NATS connected, the streams present, the store writable. The last two
// need JetStream's API and run in the background (health.Background): a
// probe answers from their last results.
func (h *Host) checks() []health.Check {
	checks := append(append([]health.Check(nil), h.cfg.Checks...), health.NATSConnected(h.cfg.Conn))
	return append(checks, h.jsOK...)
}

// NewHTTPServer is the HTTP server of Handler: cfg's Handler, Metrics and
// Logger are set here, and /readyz fails once the server drains. Start it
// after Start, and Stop it before Stop (and before the Servers of this
// process), so that the requests in flight get their results.
func (h *Host) NewHTTPServer(cfg httpapi.ServerConfig) (*httpapi.Server, error) {
	var srv *httpapi.Server
	ready := health.Check{Name: "http", Func: func(ctx context.Context) error { return srv.Ready(ctx) }}
	cfg.Handler, cfg.Metrics, cfg.Logger = h.Handler(ready), h.front, h.cfg.Logger
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = h.cfg.API.MaxBodyBytes // the API's and /mcp's limit: the server refuses no body they take
	}
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
func (h *Host) fleetSchedSnapshot() sched.Snapshot {
	ctx, cancel := context.WithTimeout(context.Background(), fleetSnapshotWait)
	defer cancel()
	snaps, err := ops.SchedStats(ctx, h.cfg.Conn, ops.SchedStatsOptions{Window: fleetSnapshotWait, Idle: fleetSnapshotIdle})
	if err != nil || len(snaps) == 0 {
		return h.d.SchedSnapshot()
	}
	return sched.Merge(snaps)
}

// How long the console's overview waits for the orchestrators' snapshots:
// they answer within a millisecond or two on a healthy connection.
const (
	fleetSnapshotWait = 250 * time.Millisecond
	fleetSnapshotIdle = 25 * time.Millisecond
)
