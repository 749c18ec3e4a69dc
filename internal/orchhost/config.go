package orchhost

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/front/mcpfront"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
)

// Config configures a Host. Zero fields take the documented defaults
// (WithDefaults); Validate names the field that is wrong.
type Config struct {
	// Conn is the NATS connection. Required. The Host does not close it.
	Conn *nats.Conn
	// Replicas of the buckets the Host creates when they are
	// missing, unless History or Discovery name their own: 1 on one
	// server, 3 on a cluster, as the streams. Default 1.
	Replicas int
	// Dispatch is the dispatcher's configuration: Instance (default
	// random), DefaultTimeout, PublishRetryFor, admission limits and the
	// rest, with package dispatch's defaults. Its NC, JS, Catalog, Metrics
	// and Logger are set by the Host.
	Dispatch dispatch.Config
	// Catalog says which tools exist and who serves them. Default: the
	// live catalog of the workers' announcements (package discovery) in
	// the Discovery bucket.
	Catalog dispatch.Catalog
	// Discovery is the bucket of the workers' announcements that the live
	// catalog watches.
	Discovery discovery.BucketConfig
	// History is the attempts bucket the poison watcher reads, opened (or
	// created) at Start. Best effort: without it, the dead letters it
	// makes carry only their last attempt.
	History settle.HistoryConfig
	// NoPoisonWatcher runs without the poison watcher, which sets aside
	// (dead-letters) a call that stops every worker running it.
	NoPoisonWatcher bool
	// Tasks is the durable tasks' store's configuration (async HTTP
	// calls, MCP tasks): its bucket, Retention, Lease. Its Dispatcher,
	// Instance and Logger are set by the Host; its Replicas default to
	// Replicas.
	Tasks tasks.Config
	// MCPAskHosts lets the MCP server ask a 2026-07-28 host that declares
	// elicitation for the approval of a held call (MCP.HostApprovals is
	// then the approval store's Decide, via "mcp").
	MCPAskHosts bool
	// API is the HTTP API's configuration (Handler): API keys, body and
	// timeout limits. Its Dispatcher, Definitions, Metrics and Logger are
	// set by the Host.
	API httpapi.Config
	// MCP is the MCP server's configuration (Handler's /mcp, and MCP for
	// stdio): its bearer Token and limits. Its Dispatcher, Tools,
	// Subscribe and Logger are set by the Host; its Keys default to
	// API.Keys, so an API key works on /mcp as on /v1/.
	MCP mcpfront.Config
	// Console, when set, is the operators' web console's configuration:
	// Handler serves it at /ui (package console). Its Conn, JetStream,
	// Live, Checks, Logger, Approvals, Budgets and CacheCounts are set by
	// the Host, and its Snapshot, when
	// nil, to the sum of the orchestrators' schedulers; nil: no /ui.
	Console *console.Config
	// Checks are more readiness checks for Handler's /readyz, e.g. those
	// of a worker host in the same process (its Checks).
	Checks []health.Check
	// Metrics is the registry the Host's metrics are registered in, with
	// the pool's state read from JetStream at scrape time. Default: a
	// registry of its own. Handler serves it.
	Metrics *metrics.Registry
	// Tracer, when on, records the spans of the front doors' requests and
	// of the calls (package tracing); the Host gives it to the
	// dispatcher, the policy gate and the front doors. Default nil: off.
	Tracer *tracing.Tracer
	// Logger receives the Host's logs. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Replicas = cmp.Or(c.Replicas, jetstream.ReplicasDefault)
	c.History.Replicas = cmp.Or(c.History.Replicas, c.Replicas)
	c.Discovery.Replicas = cmp.Or(c.Discovery.Replicas, c.Replicas)
	c.Tasks.Replicas = cmp.Or(c.Tasks.Replicas, c.Replicas)
	if c.Metrics == nil {
		c.Metrics = metrics.NewRegistry()
	}
	return c
}

// Validate reports the first field of c that is wrong, by name.
func (c Config) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("orchhost: Config.Conn is required")
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("orchhost: Config.Replicas must be 1 to 5, got %d", c.Replicas)
	}
	return nil
}
