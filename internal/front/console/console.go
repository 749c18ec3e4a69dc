package console

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
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/internal/worker/settle"
)

// Path is where the orchestrator serves the console.
const Path = "/ui/"

// Defaults of Config.
const (
	// SessionTTLDefault is how long an operator's login lasts.
	SessionTTLDefault = 12 * time.Hour
	// RefreshDefault is how long the overview's state is reused: the
	// pages poll about once a second, and any number of them cost the
	// orchestrator one read of the state per RefreshDefault.
	RefreshDefault = time.Second
	// HealthEveryDefault is how often the pool's health checks run while
	// someone watches (one of them writes to the store).
	HealthEveryDefault = 5 * time.Second
	// IdleAfterDefault is how long after the last request the console
	// stops watching results (the overview's rates and the tail).
	IdleAfterDefault = 2 * time.Minute
	// PageSizeDefault is how many dead letters a page lists.
	PageSizeDefault = 50
)

// ErrStopped is the cause with which Stop cancels the replays and purges
// still running.
var ErrStopped = errors.New("console: stopped")

// Config configures a Console. Zero fields take the documented defaults
// (WithDefaults); Validate names the field that is wrong.
type Config struct {
	// Conn and JetStream are the orchestrator's. Required.
	Conn      *nats.Conn
	JetStream js.JetStream
	// Live is the live catalog of the workers' announcements: the
	// workers, their slots and the tools' catalog entries. Nil: the
	// console shows no workers.
	Live *discovery.Catalog
	// Checks are the pool's health checks shown on the overview (those
	// of /readyz).
	Checks []health.Check
	// Snapshot returns the schedulers' state for "waiting on a limit"
	// (the Orchestrator gives the sum over every orchestrator that
	// answers). Nil: the column stays empty.
	Snapshot func() sched.Snapshot
	// Tokens are the operators' tokens. With any, every page needs a
	// login; with none the console is open, which Validate allows only
	// when Loopback or InsecureNoAuth is set.
	Tokens *Tokens
	// Loopback says the HTTP server listens on a loopback address only.
	Loopback bool
	// InsecureNoAuth opens the console without tokens on a non-loopback
	// address (something in front authenticates).
	InsecureNoAuth bool
	// SessionTTL is how long a login lasts. Default SessionTTLDefault.
	SessionTTL time.Duration
	// Refresh is how long the overview's state is reused. Default
	// RefreshDefault.
	Refresh time.Duration
	// HealthEvery is how often the health checks run. Default
	// HealthEveryDefault.
	HealthEvery time.Duration
	// IdleAfter is how long after the last request results are watched.
	// Default IdleAfterDefault.
	IdleAfter time.Duration
	// PageSize is how many dead letters a page lists. Default
	// PageSizeDefault.
	PageSize int
	// Logger receives the audit log (every replay, purge, pause and
	// resume, with the operator) and errors. Default slog.Default().
	Logger *slog.Logger
	// Approvals is the approval store: the Approvals page lists the
	// held calls and decides them through it. Nil: the page says
	// approvals are not enabled.
	Approvals Approvals
	// Budgets lists the budgets with their spending, shown on the
	// overview. Nil: no budgets there.
	Budgets Budgets
	// CacheCounts returns this orchestrator's result-cache outcomes per
	// tool since it started (metrics.Cache's ByTool), shown on the
	// overview. Nil: no cache column.
	CacheCounts func() []metrics.CacheToolCounts
	// Attempts names the attempts bucket (the orchestrator's
	// settle.HistoryConfig): a call's page lists its failed attempts from
	// it. Zero: the default bucket.
	Attempts settle.HistoryConfig
	// Backlog is the fleet's backlog and history (package backlog's
	// *Monitor): the backlog states and drain estimates on the overview,
	// which is not green while a tool backs up or stalls, and the charts
	// of the last hour. Nil: none of them.
	Backlog Backlog
	// TraceURL, when set, links calls and dead letters to their trace: a
	// URL template with TraceIDPlaceholder where the trace's id goes, e.g.
	// Jaeger's http://127.0.0.1:16686/trace/{trace_id}. http or https only.
	TraceURL string
	// Tracer, when on, gives each replay the console starts a span
	// linked to its dead letter's trace (as `orchestrator dlq replay`
	// does). Nil: off.
	Tracer *tracing.Tracer
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.SessionTTL = cmp.Or(c.SessionTTL, SessionTTLDefault)
	c.Refresh = cmp.Or(c.Refresh, RefreshDefault)
	c.HealthEvery = cmp.Or(c.HealthEvery, HealthEveryDefault)
	c.IdleAfter = cmp.Or(c.IdleAfter, IdleAfterDefault)
	c.PageSize = cmp.Or(c.PageSize, PageSizeDefault)
	return c
}

// Validate reports the first field of c that is wrong, by name.
func (c Config) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("console: Config.Conn is required")
	case c.JetStream == nil:
		return errors.New("console: Config.JetStream is required")
	case c.Tokens.Len() == 0 && !c.Loopback && !c.InsecureNoAuth:
		return errors.New("console: Config.Tokens are required on a non-loopback address (or set Config.InsecureNoAuth)")
	case c.SessionTTL < 0 || c.Refresh < 0 || c.HealthEvery < 0 || c.IdleAfter < 0:
		return errors.New("console: Config.SessionTTL, Refresh, HealthEvery and IdleAfter must not be negative")
	case c.PageSize < 0 || c.PageSize > 1000:
		return errors.New("console: Config.PageSize must be 1 to 1000")
	}
	return CheckTraceURL("console: Config.TraceURL", c.TraceURL)
}

// Console serves the operators' web console. Create it with New, serve
// Handler under Path, Start it, and Stop it.
type Console struct {
	startstop.Base // its life bounds the replays and purges

	cfg      Config
	log      *slog.Logger
	pages    *pages
	sessions *sessions
	logins   *loginThrottle
	jobs     *jobs
	watch    *watcher
	over     *overviewCache
	mux      *http.ServeMux

	storeMu sync.Mutex
	store   *dlq.Store
	hist    *settle.History
}

// New returns a Console for cfg, with defaults applied. It touches no
// network: Start does.
func New(cfg Config) (*Console, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg: cfg, log: cfg.Logger.With("component", "console"), pages: p,
		sessions: newSessions(cfg.SessionTTL), logins: newLoginThrottle(time.Now),
	}
	c.jobs = newJobs()
	c.watch = newWatcher(cfg.Conn, cfg.IdleAfter, c.log)
	c.over = newOverviewCache(c)
	c.mux = c.routes()
	return c, nil
}

// Start starts the console's background work: watching results while
// someone looks. It returns at once. The replays and purges run within
// Start and Stop.
func (c *Console) Start(ctx context.Context) error {
	err := c.Base.Start(ctx, func(context.Context) error {
		c.Go(c.watch.run)
		// Stop returns once the jobs it cancelled have ended.
		c.Go(func(life context.Context) {
			<-life.Done()
			c.jobs.wait()
		})
		return nil
	})
	if errors.Is(err, startstop.ErrStarted) {
		return fmt.Errorf("console: %w", err)
	}
	return err
}

// Stop lets the replays and purges running finish until ctx ends, then
// cancels them with ErrStopped, and stops watching results. It returns
// ctx's cause when jobs were cancelled. Stopped is closed once it has
// returned.
func (c *Console) Stop(ctx context.Context) error {
	return c.Base.Stop(ctx, ErrStopped, c.drain)
}

// drain waits for the jobs running, until ctx ends.
func (c *Console) drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { c.jobs.wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Handler serves the console under Path. Serve it behind an
// httpapi.Server, whose gate checks the Host.
func (c *Console) Handler() http.Handler { return c.mux }

// dlqStore binds to TOOL_DLQ, once it succeeds.
func (c *Console) dlqStore(ctx context.Context) (*dlq.Store, error) {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	if c.store == nil {
		s, err := dlq.NewStore(ctx, c.cfg.JetStream)
		if err != nil {
			return nil, err
		}
		c.store = s
	}
	return c.store, nil
}
