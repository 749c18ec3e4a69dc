package host

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults and bounds of a Host.
const (
	// WorkersDefault is Config.Workers: one worker per connection pulls
	// for as many slots as its Concurrency.
	WorkersDefault = 1
	// StartTimeoutDefault bounds Start's requests to the server when the
	// ctx given to Start has no deadline of its own.
	StartTimeoutDefault = 30 * time.Second
	// WithdrawTimeoutDefault bounds the withdrawal of a worker's
	// announcements in Stop (they expire on their own otherwise).
	WithdrawTimeoutDefault = 5 * time.Second
	// LostConnDrain is how long Stop lets calls run once the NATS
	// connection is closed for good: none of their results could be
	// published, so they are cancelled almost at once.
	LostConnDrain = time.Second
)

// Defaults and bounds of the workers' configuration (Config.Worker), for
// the worker binary's flags.
const (
	ConcurrencyDefault     = worker.ConcurrencyDefault
	DrainTimeoutDefault    = worker.DrainTimeoutDefault
	PublishRetryForDefault = worker.PublishRetryForDefault
	AckWaitDefault         = jetstream.AckWaitDefault
	AckWaitMin             = jetstream.AckWaitMin
	WorkerIDMaxBytes       = worker.WorkerIDMaxBytes
	HistoryTTLDefault      = settle.HistoryTTLDefault
)

// Config configures a Host. Zero fields take the documented defaults
// (WithDefaults); Validate names the field that is wrong.
type Config struct {
	// Conn is the NATS connection the workers pull and publish on.
	// Required. The Host does not close it.
	Conn *nats.Conn
	// Registry holds the tools served. Default: a new registry, which
	// Catalog fills.
	Registry *tools.Registry
	// Catalog, when set, adds its tools to Registry at New (its webhook,
	// exec and builtin ones) and at Start (its MCP servers' tools, followed
	// while they run); Stop stops its MCP servers after the workers and
	// closes it. A Host takes it only when New succeeds.
	Catalog *Catalog
	// StartEmpty lets the Host start with no tool: its workers pull
	// nothing until Serve adds tools. A Catalog with MCP servers implies
	// it (their tools may come later).
	StartEmpty bool
	// Workers is how many workers pull on Conn. Default WorkersDefault.
	Workers int
	// Worker is each worker's configuration: Concurrency, DrainTimeout
	// (which also bounds Stop when its ctx has no deadline),
	// PublishRetryFor, WorkerID (with several workers, the i-th gets
	// "<WorkerID>-<i>"), AckWait and the rest, with package worker's
	// defaults. Its JetStream and Registry are set by the Host; so are its
	// History, Metrics and Logger unless given (a test's recorder).
	Worker worker.Config
	// History is the attempts bucket, opened (or created) at Start so that
	// dead letters carry every failed attempt. Best effort: when it cannot
	// be opened the workers run without it, and a warning is logged.
	History settle.HistoryConfig
	// NoHistory runs the workers without the attempts bucket.
	NoHistory bool
	// Discovery is the bucket the workers announce their tools in, so
	// that orchestrators route calls to them.
	Discovery discovery.BucketConfig
	// NoAnnounce skips the announcements: for a pool whose orchestrator
	// has a fixed catalog.
	NoAnnounce bool
	// Checks are more readiness checks that Handler's /readyz runs after
	// the Host's own. They are not part of Checks: an orchestrator in the
	// same process stays ready without them.
	Checks []health.Check
	// Metrics is the registry the workers' (and the catalog's MCP
	// servers') metrics are registered in. Default: a registry of the
	// Host's own, served by Handler.
	Metrics *metrics.Registry
	// Logger receives the Host's logs. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = metrics.NewRegistry()
	}
	if c.Registry == nil {
		c.Registry = tools.NewRegistry()
	}
	return c
}

// Validate reports the first field of c that is wrong, by name. Whether
// the registry holds a tool is New's to check, once the catalog's are in.
func (c Config) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("host: Config.Conn is required")
	case c.Registry == nil:
		return errors.New("host: Config.Registry is required")
	case c.Workers < 1:
		return fmt.Errorf("host: Config.Workers must be at least 1, got %d", c.Workers)
	case len(c.Worker.WorkerID) > worker.WorkerIDMaxBytes:
		return fmt.Errorf("host: Config.Worker.WorkerID is %d bytes; the limit is %d", len(c.Worker.WorkerID), worker.WorkerIDMaxBytes)
	}
	return nil
}

// ErrNoTools is New's error for a Host with no tool to serve and no way to
// get one: no tool in the registry or the catalog, no MCP server, and not
// StartEmpty.
var ErrNoTools = errors.New("host: no tool to serve: register at least one (or set Config.StartEmpty)")
