package toolpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/host"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
)

// Defaults of ServerConfig (and, where the names say so, of
// OrchestratorConfig).
const (
	// WorkersDefault is ServerConfig.Workers: one worker per connection
	// pulls for as many slots as its Concurrency.
	WorkersDefault = host.WorkersDefault
	// ConcurrencyDefault is ServerConfig.Concurrency: the calls each
	// worker executes at once, over all its tools.
	ConcurrencyDefault = worker.ConcurrencyDefault
	// DrainTimeoutDefault is ServerConfig.DrainTimeout.
	DrainTimeoutDefault = worker.DrainTimeoutDefault
	// AckWaitDefault is ServerConfig.AckWait: a call held by a worker
	// that died is delivered again this long after its last heartbeat.
	AckWaitDefault = jetstream.AckWaitDefault
	// AckWaitMin is the shortest ServerConfig.AckWait.
	AckWaitMin = jetstream.AckWaitMin
	// ServerPublishRetryForDefault is ServerConfig.PublishRetryFor.
	ServerPublishRetryForDefault = worker.PublishRetryForDefault
	// WorkerIDMaxBytes is the longest ServerConfig.WorkerID: it goes into
	// the keys of the announcements, which are subjects.
	WorkerIDMaxBytes = worker.WorkerIDMaxBytes
	// ReplicasDefault is ServerConfig.Replicas and
	// OrchestratorConfig.Replicas: 1 on one server, 3 on a cluster.
	ReplicasDefault = jetstream.ReplicasDefault
	// HistoryTTLDefault is ServerConfig.HistoryTTL and
	// OrchestratorConfig.HistoryTTL.
	HistoryTTLDefault = settle.HistoryTTLDefault
	// DiscoveryTTLDefault is ServerConfig.DiscoveryTTL and
	// OrchestratorConfig.DiscoveryTTL.
	DiscoveryTTLDefault = discovery.TTLDefault
	// StartTimeoutDefault bounds Start's requests to the server when the
	// ctx given to Start has no deadline of its own.
	StartTimeoutDefault = host.StartTimeoutDefault
	// LostConnDrain is how long a Server's Stop lets calls run once the
	// NATS connection is closed for good: none of their results could be
	// published, so they are cancelled almost at once.
	LostConnDrain = host.LostConnDrain
)

// ServerConfig configures a Server. Zero fields take the documented
// defaults (WithDefaults); Validate names the field that is wrong.
type ServerConfig struct {
	// Conn is the NATS connection the workers pull and publish on.
	// Required. The Server does not close it.
	Conn *nats.Conn
	// Registry holds the program's own tools. Required unless Catalog is
	// set: at least one tool between them (or StartEmpty).
	Registry *Registry
	// Catalog, when set, adds the tools of a catalog (LoadCatalog) to
	// Registry (a new registry when nil): its webhook, exec and built-in
	// tools at NewServer, its MCP servers' tools at Start. Start starts
	// the MCP servers and follows their tools while they run (a server
	// that is down is retried, its tools served once it is up); their
	// status is part of Handler's /readyz; Stop stops them after the
	// workers and closes the catalog. A Server takes the catalog only when
	// NewServer succeeds.
	Catalog *Catalog
	// StartEmpty lets the Server start with no tool: its workers pull
	// nothing until Serve adds tools. A Catalog with MCP servers implies
	// it (their tools may come later).
	StartEmpty bool
	// Workers is how many workers pull on Conn. Default WorkersDefault.
	Workers int
	// Concurrency caps the calls each worker executes at once, over all
	// its tools: its slots, which it announces. Default
	// ConcurrencyDefault.
	Concurrency int
	// WorkerID names the worker in results, dead letters and logs, and in
	// the keys of its announcements (with several workers, the i-th is
	// "<WorkerID>-<i>"). At most WorkerIDMaxBytes. Default
	// "<hostname>-<pid>-<random>".
	WorkerID string
	// DrainTimeout is how long Stop lets the calls in flight finish when
	// the ctx given to Stop has no deadline of its own; the rest are
	// handed back to JetStream for another worker. Default
	// DrainTimeoutDefault.
	DrainTimeout time.Duration
	// AckWait is the liveness window of the consumers the workers make or
	// update: a call held by a worker that died is delivered again this
	// long after its last heartbeat. It does not bound a call's run time.
	// Give every worker of a tool the same value. At least AckWaitMin.
	// Default AckWaitDefault.
	AckWait time.Duration
	// PublishRetryFor is how long a result or dead letter whose publish
	// failed transiently (a leader election, a reconnect) is published
	// again before the call is handed back to JetStream. Default
	// ServerPublishRetryForDefault; negative: hand back at once.
	PublishRetryFor time.Duration
	// Replicas of the buckets the Server creates when they are missing
	// (the attempt history, the announcements): as the streams
	// (Provision). Default ReplicasDefault.
	Replicas int
	// HistoryTTL is how long the attempt history keeps a call's failed
	// attempts, so that its dead letter carries them all; fixed when the
	// bucket is created. Default HistoryTTLDefault. The history is best
	// effort: when it cannot be opened the workers run without it, and a
	// warning is logged.
	HistoryTTL time.Duration
	// NoHistory runs the workers without the attempt history.
	NoHistory bool
	// DiscoveryTTL is how long an announcement of the workers' tools lives
	// without a refresh; fixed when the bucket is created. Default
	// DiscoveryTTLDefault.
	DiscoveryTTL time.Duration
	// NoAnnounce skips the announcements: for a pool whose orchestrators
	// have a fixed catalog (OrchestratorConfig.FixedCatalog).
	NoAnnounce bool
	// Checks are more readiness checks that Handler's /readyz runs after
	// the Server's own. They are not part of Checks: an orchestrator in
	// the same process stays ready without them.
	Checks []Check
	// Metrics is the registry the workers' metrics are registered in.
	// Default: a registry of the Server's own, served by Handler.
	Metrics *MetricsRegistry
	// Logger receives the Server's logs. Default slog.Default().
	Logger *slog.Logger
	// TracerProvider, when set, gets an OpenTelemetry span per delivery
	// of a call: "execute_tool <tool>" (the GenAI conventions' attributes,
	// error.type on a failure, retry and dead_letter events), a child of
	// the call's W3C traceparent, and "queued <tool>" on the first
	// delivery, the time the call waited for a worker. A tool's handler
	// context carries the execute_tool span, and CallInfo.Traceparent is
	// its traceparent. The Server does not shut the provider down. Default
	// nil: no spans, at no cost.
	TracerProvider trace.TracerProvider
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c ServerConfig) WithDefaults() ServerConfig {
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DrainTimeoutDefault)
	c.AckWait = cmp.Or(c.AckWait, AckWaitDefault)
	c.PublishRetryFor = cmp.Or(c.PublishRetryFor, ServerPublishRetryForDefault)
	c.Replicas = cmp.Or(c.Replicas, ReplicasDefault)
	c.HistoryTTL = cmp.Or(c.HistoryTTL, HistoryTTLDefault)
	c.DiscoveryTTL = cmp.Or(c.DiscoveryTTL, DiscoveryTTLDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = NewMetricsRegistry()
	}
	if c.Registry == nil && c.Catalog != nil {
		c.Registry = NewRegistry()
	}
	return c
}

// Validate reports the first field of c that is wrong, by name. It
// expects the defaults applied (WithDefaults): a zero count or duration is
// reported as too small.
func (c ServerConfig) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("toolpool: ServerConfig.Conn is required")
	case c.Registry == nil:
		return errors.New("toolpool: ServerConfig.Registry is required (or a Catalog)")
	case !c.StartEmpty && len(c.Registry.Names()) == 0 && (c.Catalog == nil || c.Catalog.empty()):
		return errors.New("toolpool: ServerConfig.Registry holds no tool: register at least one (or give a Catalog, or set StartEmpty)")
	case c.Workers < 1:
		return fmt.Errorf("toolpool: ServerConfig.Workers must be at least 1, got %d", c.Workers)
	case c.Concurrency < 1:
		return fmt.Errorf("toolpool: ServerConfig.Concurrency must be at least 1, got %d", c.Concurrency)
	case len(c.WorkerID) > WorkerIDMaxBytes:
		return fmt.Errorf("toolpool: ServerConfig.WorkerID is %d bytes; the limit is %d", len(c.WorkerID), WorkerIDMaxBytes)
	case c.DrainTimeout < 0:
		return fmt.Errorf("toolpool: ServerConfig.DrainTimeout must not be negative, got %s", c.DrainTimeout)
	case c.AckWait < AckWaitMin:
		return fmt.Errorf("toolpool: ServerConfig.AckWait must be at least %s, got %s", AckWaitMin, c.AckWait)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("toolpool: ServerConfig.Replicas must be 1 to 5, got %d", c.Replicas)
	case c.HistoryTTL < 0:
		return fmt.Errorf("toolpool: ServerConfig.HistoryTTL must not be negative, got %s", c.HistoryTTL)
	case c.DiscoveryTTL < discovery.TTLMin:
		return fmt.Errorf("toolpool: ServerConfig.DiscoveryTTL must be at least %s, got %s", discovery.TTLMin, c.DiscoveryTTL)
	}
	return nil
}

// hostConfig is the worker host's configuration for c, with defaults
// applied.
func (c ServerConfig) hostConfig() host.Config {
	hc := host.Config{
		Conn: c.Conn, Registry: c.Registry, StartEmpty: c.StartEmpty, Workers: c.Workers,
		Worker: worker.Config{
			Concurrency: c.Concurrency, WorkerID: c.WorkerID, DrainTimeout: c.DrainTimeout,
			AckWait: c.AckWait, PublishRetryFor: c.PublishRetryFor, Tracer: tracing.NewTracer(c.TracerProvider),
		},
		History: settle.HistoryConfig{TTL: c.HistoryTTL, Replicas: c.Replicas}, NoHistory: c.NoHistory,
		Discovery: discovery.BucketConfig{TTL: c.DiscoveryTTL, Replicas: c.Replicas}, NoAnnounce: c.NoAnnounce,
		Checks: healthChecks(c.Checks), Metrics: c.Metrics.reg, Logger: c.Logger,
	}
	if c.Catalog != nil {
		hc.Catalog = c.Catalog.c
	}
	return hc
}

// Server is what a worker process is: workers that pull the calls of the
// tools in a registry (and a catalog) from JetStream, execute them and
// publish their results; the announcements that route calls to them; the
// attempt history that dead letters carry; their metrics and health.
// Create it with NewServer, then Start and Stop it.
type Server struct {
	h *host.Host
}

// NewServer returns a Server for cfg, with defaults applied and the
// catalog's tools registered. It does not touch the network: Start does.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h, err := host.New(cfg.hostConfig())
	if err != nil {
		return nil, fmt.Errorf("toolpool: %w", err)
	}
	return &Server{h: h}, nil
}

// Start starts the catalog's MCP servers, opens the attempt history,
// starts the workers and announces their tools. It returns once every
// worker pulls, or with the first error (what was started is stopped
// again). Requests are bounded by ctx, or, when ctx has no deadline, by
// StartTimeoutDefault for the history and as much again for the workers.
func (s *Server) Start(ctx context.Context) error { return s.h.Start(ctx) }

// Stop withdraws the announcements (so that no new call is routed here),
// then stops the workers: the calls in flight may finish until ctx is
// done (or for DrainTimeout when ctx has no deadline), then the rest are
// cancelled and handed back to JetStream for another worker. With the
// NATS connection closed for good the calls get LostConnDrain at most.
// The catalog's MCP servers stop after the workers. Stop returns nil when
// every call finished in time. It is idempotent.
func (s *Server) Stop(ctx context.Context) error { return s.h.Stop(ctx) }

// Stopped is closed once Stop has returned.
func (s *Server) Stopped() <-chan struct{} { return s.h.Stopped() }

// Serve makes every worker of the Server serve the tools ts from now on,
// and announces them: a tool not in the registry is registered first; one
// the registry holds already (served before, withdrawn by Unserve) is
// served again as registered, and announced with ts's description and
// schema. Before Start, Serve only registers them: Start serves them. It
// returns the first error (a tool the registry refuses, a consumer that
// cannot be bound); the tools before it are served.
func (s *Server) Serve(ctx context.Context, ts ...Tool) error { return s.h.Serve(ctx, ts...) }

// Unserve withdraws the announcements of the tools names, then makes
// every worker stop pulling their calls: calls pulled but not started go
// back to JetStream, calls running finish. The registry keeps the tools
// (Serve serves them again). Tools not served are ignored. Before Start,
// the tools are left out of what Start serves.
func (s *Server) Unserve(ctx context.Context, names ...string) error {
	return s.h.Unserve(ctx, names...)
}

// Conn is the connection the Server's workers use.
func (s *Server) Conn() *nats.Conn { return s.h.Conn() }

// Checks are the Server's readiness checks: the consumers of the tools it
// serves at the time of the probe exist, the workers are started and not
// draining, and, as details that do not fail a probe, the catalog's MCP
// servers are up. Handler serves them; an Orchestrator in the same
// process adds them to its own (OrchestratorConfig.Checks).
func (s *Server) Checks() []Check { return rootChecks(s.h.Checks()) }

// Handler serves GET /metrics (the Server's registry), GET /healthz (503
// once the NATS connection is closed for good) and GET /readyz (NATS
// connected, streams present, Checks, the catalog's MCP servers up,
// ServerConfig.Checks).
func (s *Server) Handler() http.Handler { return s.h.Handler() }
