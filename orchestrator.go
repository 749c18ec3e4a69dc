package toolpool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/fleet/backlog"
	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/front/mcpfront"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchhost"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of OrchestratorConfig (ReplicasDefault, HistoryTTLDefault and
// DiscoveryTTLDefault are ServerConfig's too).
const (
	// DefaultTimeoutDefault is OrchestratorConfig.DefaultTimeout.
	DefaultTimeoutDefault = dispatch.DefaultTimeoutDefault
	// OrchestratorPublishRetryForDefault is
	// OrchestratorConfig.PublishRetryFor: long enough to ride out the
	// election of a new stream leader in a cluster.
	OrchestratorPublishRetryForDefault = dispatch.PublishRetryForDefault
	// MaxCallsInFlightDefault is OrchestratorConfig.MaxCallsInFlight.
	MaxCallsInFlightDefault = dispatch.MaxCallsInFlightDefault
	// MaxQueueDepthDefault is OrchestratorConfig.MaxQueueDepth.
	MaxQueueDepthDefault = dispatch.MaxQueueDepthDefault
	// MaxBodyBytesDefault is OrchestratorConfig.MaxBodyBytes.
	MaxBodyBytesDefault = httpapi.MaxBodyBytesDefault
	// MaxCallsPerRequestDefault is OrchestratorConfig.MaxCallsPerRequest.
	MaxCallsPerRequestDefault = httpapi.MaxCallsDefault
	// RequestTimeoutDefault is OrchestratorConfig.RequestTimeout.
	RequestTimeoutDefault = httpapi.DefaultTimeoutDefault
	// MaxRequestTimeoutDefault is OrchestratorConfig.MaxRequestTimeout.
	MaxRequestTimeoutDefault = httpapi.MaxTimeoutDefault
	// AsyncRetentionDefault is OrchestratorConfig.AsyncRetention.
	AsyncRetentionDefault = tasks.RetentionDefault
	// AsyncLeaseDefault is OrchestratorConfig.AsyncLease.
	AsyncLeaseDefault = tasks.LeaseDefault
	// AsyncLeaseMin is the shortest OrchestratorConfig.AsyncLease.
	AsyncLeaseMin = time.Second
	// BacklogAgeDefault is OrchestratorConfig.BacklogAge: 30s.
	BacklogAgeDefault = backlog.BacklogAgeDefault
	// MCPMaxSessionsDefault is OrchestratorConfig.MCPMaxSessions.
	MCPMaxSessionsDefault = mcpfront.MaxSessionsDefault
	// MCPSessionTimeoutDefault is OrchestratorConfig.MCPSessionTimeout.
	MCPSessionTimeoutDefault = mcpfront.SessionTimeoutDefault
)

// OrchestratorConfig configures an Orchestrator. Zero fields take the
// documented defaults (WithDefaults); Validate names the field that is
// wrong.
type OrchestratorConfig struct {
	// Conn is the NATS connection. Required. The Orchestrator does not
	// close it.
	Conn *nats.Conn
	// Instance is this orchestrator's id: calls carry it as their reply
	// subject's token and results come back on tools.result.<Instance>. 1
	// to 64 letters, digits, '_' and '-'. Default: a random id, unique per
	// process.
	Instance string
	// Replicas of the buckets the Orchestrator creates when they are
	// missing (the attempt history, the announcements): as the streams
	// (Provision). Default ReplicasDefault.
	Replicas int
	// DefaultTimeout is how long a call of Dispatch waits for its result
	// when Dispatch's ctx has no deadline. Default DefaultTimeoutDefault.
	DefaultTimeout time.Duration
	// PublishRetryFor is how long Dispatch keeps publishing the calls
	// JetStream did not acknowledge (a failover, a server restart) before
	// the turn fails as unavailable. Default
	// OrchestratorPublishRetryForDefault; negative: fail at once.
	PublishRetryFor time.Duration
	// MaxCallsInFlight caps the calls this orchestrator waits for at
	// once; past it a turn is refused at once as saturated (the HTTP API
	// answers 429). Default MaxCallsInFlightDefault; negative: unbounded.
	MaxCallsInFlight int
	// MaxQueueDepth caps the calls waiting in one tool's queue past which
	// turns calling it are refused at once. Default MaxQueueDepthDefault;
	// negative: unbounded.
	MaxQueueDepth int
	// NoQueueWaitAdmission turns off refusing the turns calling a tool
	// whose queue holds more work than the turn has time left for
	// (estimated from the rate its workers drain it).
	NoQueueWaitAdmission bool
	// NoFairness turns the fair-share scheduler off: calls are published
	// in arrival order, and no per-key limit applies. By default a
	// saturated tool's slots are shared between tenants (APIKey.Weight),
	// by priority, and the tools' per-key limits apply.
	NoFairness bool
	// FixedCatalog, when set, replaces the live catalog of the workers'
	// announcements: the tools of this registry are taken to be served,
	// by Servers that do not announce them (ServerConfig.NoAnnounce).
	FixedCatalog *Registry
	// DiscoveryTTL is how long an announcement lives without a refresh,
	// when the Orchestrator creates the bucket. Default
	// DiscoveryTTLDefault.
	DiscoveryTTL time.Duration
	// HistoryTTL is how long the attempt history keeps a call's failed
	// attempts, when the Orchestrator creates the bucket (its poison
	// watcher reads it). Default HistoryTTLDefault.
	HistoryTTL time.Duration
	// AsyncRetention is how long an async call's (and an MCP task's)
	// record and results are kept after it ended: the TTL of the tasks
	// bucket, fixed when the bucket is created, at least a minute.
	// Default AsyncRetentionDefault (24h).
	AsyncRetention time.Duration
	// AsyncLease is how long a replica's claim on an async call (or an
	// MCP task) it runs lasts without a refresh (it refreshes every third
	// of it, and looks for lapsed claims as often): a task whose replica
	// died is adopted by another about this long after the dead one's
	// last refresh. Give every replica the same value. At least
	// AsyncLeaseMin; default AsyncLeaseDefault (15s).
	AsyncLease time.Duration
	// NoPoisonWatcher runs without the poison watcher, which sets aside
	// (dead-letters) a call that stops every worker running it.
	NoPoisonWatcher bool
	// APIKeys, when any, make every request of the HTTP API and of /mcp
	// need one (Authorization: Bearer <key>); each names its tenant, the
	// tools it may call, its weight and priorities. Default: none, every
	// request is let in (serve Handler on loopback only, or behind
	// something that authenticates).
	APIKeys []APIKey
	// MaxBodyBytes caps a request body of the HTTP API and of /mcp (and
	// a message of MCP on stdio). Default MaxBodyBytesDefault.
	MaxBodyBytes int64
	// MaxCallsPerRequest caps the tool calls of one request. Default
	// MaxCallsPerRequestDefault.
	MaxCallsPerRequest int
	// RequestTimeout is how long POST /v1/tool_calls waits for the
	// results when the request names no timeout. Default
	// RequestTimeoutDefault.
	RequestTimeout time.Duration
	// MaxRequestTimeout caps the timeout a request may ask for. Default
	// MaxRequestTimeoutDefault.
	MaxRequestTimeout time.Duration
	// MCPToken, when set, is a bearer token /mcp lets in besides the API
	// keys (Authorization: Bearer <MCPToken>), at least APIKeyMinBytes.
	// With neither, /mcp is open.
	MCPToken string
	// MCPRefusal, when not empty, makes /mcp answer every request 403
	// with this text: it is mounted but not exposed (an address without
	// authentication, say). MCP on stdio is not affected.
	MCPRefusal string
	// MCPMaxSessions caps the /mcp sessions (revisions before 2026-07-28)
	// this process holds; a session opened past it works, served
	// statelessly (docs/mcp.md). Default MCPMaxSessionsDefault; negative:
	// none held.
	MCPMaxSessions int
	// MCPSessionTimeout ends the process state of a /mcp session idle
	// that long. Default MCPSessionTimeoutDefault.
	MCPSessionTimeout time.Duration
	// MCPAskHosts lets a 2026-07-28 MCP host that declares elicitation be
	// asked for the approval of a call its tool's rule holds (the host's
	// user decides, through input_required; docs/mcp.md). Default false:
	// only operators decide (console, orchestrator approvals).
	MCPAskHosts bool
	// Console serves the operators' web console at /ui (Handler): the
	// pool's state, the dead letters (replay, purge) and pause/resume.
	Console bool
	// ConsoleTokens are the operators' tokens, by operator name (the
	// name in the audit log), each at least OperatorTokenMinBytes: with
	// any, every page of the console needs a login. With none the console
	// is open, which needs ConsoleLoopback or ConsoleInsecureNoAuth.
	ConsoleTokens map[string]string
	// ConsoleLoopback says Handler is served on loopback addresses only:
	// the console may be open, its operator "local" in the audit log.
	ConsoleLoopback bool
	// ConsoleInsecureNoAuth opens the console without tokens on an
	// address that is not loopback (something in front authenticates);
	// its operator is "anonymous" in the audit log.
	ConsoleInsecureNoAuth bool
	// TraceURL links the console's calls and dead letters to their trace
	// in a tracing UI: a URL template with {trace_id} where the trace's id
	// goes, e.g. Jaeger's http://127.0.0.1:16686/trace/{trace_id} or a
	// Grafana Explore URL. http or https only. Empty: no links.
	TraceURL string
	// BacklogAge is the age of a tool's oldest queued call past which its
	// backlog is backing up (the console's overview, the
	// toolpool_backlog_state metric). Default BacklogAgeDefault.
	BacklogAge time.Duration
	// Checks are more readiness checks for Handler's /readyz, e.g. those
	// of a Server in the same process (Server.Checks).
	Checks []Check
	// Metrics is the registry the Orchestrator's metrics are registered
	// in, with the pool's state read from JetStream at scrape time.
	// Default: a registry of its own. Handler serves it.
	Metrics *MetricsRegistry
	// TracerProvider, when set, records OpenTelemetry spans: a span per
	// request of the HTTP API and per MCP tools/call, and one per call,
	// "call <tool>", from its admission to its result, whose context the
	// call carries to the workers (docs/observability.md). Default nil:
	// no spans, at no cost. `orchestrator serve` sets it from the OTEL_*
	// environment.
	TracerProvider trace.TracerProvider
	// Logger receives the Orchestrator's logs. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to their defaults (but
// Instance, which NewOrchestrator draws).
func (c OrchestratorConfig) WithDefaults() OrchestratorConfig {
	c.Replicas = cmp.Or(c.Replicas, ReplicasDefault)
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, DefaultTimeoutDefault)
	c.PublishRetryFor = cmp.Or(c.PublishRetryFor, OrchestratorPublishRetryForDefault)
	c.MaxCallsInFlight = cmp.Or(c.MaxCallsInFlight, MaxCallsInFlightDefault)
	c.MaxQueueDepth = cmp.Or(c.MaxQueueDepth, MaxQueueDepthDefault)
	c.DiscoveryTTL = cmp.Or(c.DiscoveryTTL, DiscoveryTTLDefault)
	c.HistoryTTL = cmp.Or(c.HistoryTTL, HistoryTTLDefault)
	c.AsyncRetention = cmp.Or(c.AsyncRetention, AsyncRetentionDefault)
	c.AsyncLease = cmp.Or(c.AsyncLease, AsyncLeaseDefault)
	c.BacklogAge = cmp.Or(c.BacklogAge, BacklogAgeDefault)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, MaxBodyBytesDefault)
	c.MaxCallsPerRequest = cmp.Or(c.MaxCallsPerRequest, MaxCallsPerRequestDefault)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, RequestTimeoutDefault)
	c.MaxRequestTimeout = cmp.Or(c.MaxRequestTimeout, MaxRequestTimeoutDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = NewMetricsRegistry()
	}
	return c
}

// Validate reports the first field of c that is wrong, by name. It
// expects the defaults applied (WithDefaults). The API keys and operator
// tokens are checked by NewOrchestrator, naming the entry and its field.
func (c OrchestratorConfig) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("toolpool: OrchestratorConfig.Conn is required")
	case c.Instance != "" && jetstream.CheckToken("instance", c.Instance) != nil:
		return fmt.Errorf("toolpool: OrchestratorConfig.Instance: %w", jetstream.CheckToken("instance", c.Instance))
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("toolpool: OrchestratorConfig.Replicas must be 1 to 5, got %d", c.Replicas)
	case c.DefaultTimeout < 0:
		return fmt.Errorf("toolpool: OrchestratorConfig.DefaultTimeout must not be negative, got %s", c.DefaultTimeout)
	case c.DiscoveryTTL < discovery.TTLMin:
		return fmt.Errorf("toolpool: OrchestratorConfig.DiscoveryTTL must be at least %s, got %s", discovery.TTLMin, c.DiscoveryTTL)
	case c.HistoryTTL < 0:
		return fmt.Errorf("toolpool: OrchestratorConfig.HistoryTTL must not be negative, got %s", c.HistoryTTL)
	case c.AsyncRetention < time.Minute:
		return fmt.Errorf("toolpool: OrchestratorConfig.AsyncRetention must be at least 1m, got %s", c.AsyncRetention)
	case c.AsyncLease < AsyncLeaseMin:
		return fmt.Errorf("toolpool: OrchestratorConfig.AsyncLease must be at least %s, got %s", AsyncLeaseMin, c.AsyncLease)
	case c.BacklogAge < 0:
		return fmt.Errorf("toolpool: OrchestratorConfig.BacklogAge must not be negative, got %s", c.BacklogAge)
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("toolpool: OrchestratorConfig.MaxBodyBytes must not be negative, got %d", c.MaxBodyBytes)
	case c.MCPSessionTimeout < 0:
		return fmt.Errorf("toolpool: OrchestratorConfig.MCPSessionTimeout must not be negative, got %s", c.MCPSessionTimeout)
	case c.MaxCallsPerRequest < 0:
		return fmt.Errorf("toolpool: OrchestratorConfig.MaxCallsPerRequest must not be negative, got %d", c.MaxCallsPerRequest)
	case c.RequestTimeout > c.MaxRequestTimeout:
		return fmt.Errorf("toolpool: OrchestratorConfig.RequestTimeout %s is over MaxRequestTimeout %s", c.RequestTimeout, c.MaxRequestTimeout)
	case c.MCPToken != "" && len(c.MCPToken) < APIKeyMinBytes:
		return fmt.Errorf("toolpool: OrchestratorConfig.MCPToken is %d characters; a bearer token needs at least %d (e.g. openssl rand -hex 32)", len(c.MCPToken), APIKeyMinBytes)
	case c.Console && len(c.ConsoleTokens) == 0 && !c.ConsoleLoopback && !c.ConsoleInsecureNoAuth:
		return errors.New("toolpool: OrchestratorConfig.ConsoleTokens are required for a console not on loopback (or set ConsoleLoopback or ConsoleInsecureNoAuth)")
	}
	return console.CheckTraceURL("toolpool: OrchestratorConfig.TraceURL", c.TraceURL)
}

// hostConfig is the orchestrator host's configuration for c, with
// defaults applied: its API keys and operator tokens are built here.
func (c OrchestratorConfig) hostConfig() (orchhost.Config, error) {
	keys, err := apiKeys(c.APIKeys, "toolpool: OrchestratorConfig.APIKeys")
	if err != nil {
		return orchhost.Config{}, err
	}
	hc := orchhost.Config{
		Conn: c.Conn, Replicas: c.Replicas,
		Dispatch: dispatch.Config{
			Instance: c.Instance, DefaultTimeout: c.DefaultTimeout, PublishRetryFor: c.PublishRetryFor,
			MaxCallsInFlight: c.MaxCallsInFlight, MaxQueueDepth: c.MaxQueueDepth,
			NoQueueWaitAdmission: c.NoQueueWaitAdmission, NoFairness: c.NoFairness,
		},
		Discovery:       discovery.BucketConfig{TTL: c.DiscoveryTTL, Replicas: c.Replicas},
		History:         settle.HistoryConfig{TTL: c.HistoryTTL, Replicas: c.Replicas},
		Tasks:           tasks.Config{Retention: c.AsyncRetention, Lease: c.AsyncLease, Replicas: c.Replicas},
		NoPoisonWatcher: c.NoPoisonWatcher,
		Backlog:         backlog.Config{BacklogAge: c.BacklogAge},
		API: httpapi.Config{
			Keys: keys, MaxBodyBytes: c.MaxBodyBytes, MaxCalls: c.MaxCallsPerRequest,
			DefaultTimeout: c.RequestTimeout, MaxTimeout: c.MaxRequestTimeout,
		},
		MCP: mcpfront.Config{Token: c.MCPToken, Closed: c.MCPRefusal, MaxBodyBytes: c.MaxBodyBytes,
			MaxCalls: c.MaxCallsPerRequest, MaxSessions: c.MCPMaxSessions, SessionTimeout: c.MCPSessionTimeout},
		MCPAskHosts: c.MCPAskHosts,
		Checks:      healthChecks(c.Checks), Metrics: c.Metrics.reg, Logger: c.Logger,
		Tracer: tracing.NewTracer(c.TracerProvider),
	}
	if c.FixedCatalog != nil {
		hc.Catalog = discovery.RegistryCatalog(c.FixedCatalog)
	}
	if c.Console {
		tokens, err := consoleTokens(c.ConsoleTokens)
		if err != nil {
			return orchhost.Config{}, err
		}
		hc.Console = &console.Config{Tokens: tokens, Loopback: c.ConsoleLoopback, InsecureNoAuth: c.ConsoleInsecureNoAuth, TraceURL: c.TraceURL}
	}
	return hc, nil
}

// consoleTokens builds the console's tokens, checked as a tokens file is.
func consoleTokens(m map[string]string) (*console.Tokens, error) {
	if len(m) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(m) // JSON is YAML
	if err != nil {
		return nil, err
	}
	return console.ParseTokens(data, "toolpool: OrchestratorConfig.ConsoleTokens")
}

// Orchestrator is what serves agents: it keeps the live catalog of tools,
// publishes calls and waits for their results (the dispatcher), sets
// poison calls aside, and serves the HTTP API, the MCP server and the
// operators' console (Handler). Create it with NewOrchestrator, then
// Start and Stop it.
type Orchestrator struct {
	h *orchhost.Host
}

// NewOrchestrator returns an Orchestrator for cfg, with defaults applied.
// It does not touch the network: Start does.
func NewOrchestrator(cfg OrchestratorConfig) (*Orchestrator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc, err := cfg.hostConfig()
	if err != nil {
		return nil, err
	}
	h, err := orchhost.New(hc)
	if err != nil {
		return nil, fmt.Errorf("toolpool: %w", err)
	}
	return &Orchestrator{h: h}, nil
}

// Start opens the attempt history, starts the poison watcher and the live
// catalog, then the dispatcher. The streams must exist (Provision). It
// returns once calls can be dispatched, or with the first error (what was
// started is stopped again). Requests are bounded by ctx, or, when ctx
// has no deadline, by StartTimeoutDefault for each step.
func (o *Orchestrator) Start(ctx context.Context) error { return o.h.Start(ctx) }

// Stop stops the dispatcher — the turns in progress may finish until ctx
// is done, then the rest fail as unavailable — then the live catalog and
// the poison watcher. It returns nil when every turn ended in time. It is
// idempotent.
func (o *Orchestrator) Stop(ctx context.Context) error { return o.h.Stop(ctx) }

// Stopped is closed once Stop has returned.
func (o *Orchestrator) Stopped() <-chan struct{} { return o.h.Stopped() }

// Dispatch publishes the tool calls of one assistant turn, in parallel,
// and returns their results in the calls' order: a failed call is a
// Result with IsError, its content written for the model. ctx bounds the
// wait (DefaultTimeout without a deadline) and carries the tenant, weight
// and priority of the calls (WithTenant, WithWeight, WithPriority); a
// session ("" for none) scopes the advice added when one tool keeps
// failing. The error, when the pool could not take the calls, matches
// ErrUnavailable (and ErrSaturated when admission control refused them).
func (o *Orchestrator) Dispatch(ctx context.Context, session string, calls []ToolUse) ([]Result, error) {
	return o.h.Dispatch(ctx, session, calls)
}

// Instance is the id in this orchestrator's result subjects.
func (o *Orchestrator) Instance() string { return o.h.Instance() }

// Definitions are the tools live workers serve, in the Anthropic tools
// format; with a FixedCatalog, those of its registry.
func (o *Orchestrator) Definitions(ctx context.Context) []tools.Definition {
	return o.h.Definitions(ctx)
}

// ServeMCPStdio serves the Orchestrator's MCP server on a host's pipes
// (the stdio transport: `orchestrator mcp`) until r ends or ctx is done.
func (o *Orchestrator) ServeMCPStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	return o.h.MCP().ServeStdio(ctx, r, w)
}

// Handler serves the agent API (POST /v1/tool_calls, GET /v1/tools:
// docs/http-api.md), the MCP server on /mcp (streamable HTTP), the
// operators' console on /ui with OrchestratorConfig.Console, GET /metrics,
// GET /healthz (503 once the NATS connection is closed for good) and
// GET /readyz (NATS connected, streams present, the store takes a write,
// OrchestratorConfig.Checks). It checks the API keys itself: mount it on
// a mux of the program's, or serve it with NewHTTPServer for the browser,
// host and load checks of a server facing the network.
func (o *Orchestrator) Handler() http.Handler { return o.h.Handler() }
