package toolpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults shared by Server and Orchestrator.
const (
	// WorkersDefault is ServerConfig.Workers: one worker per connection
	// pulls for as many slots as its Concurrency.
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

// ErrConnClosed is the cause a Server or Orchestrator gives when its NATS
// connection closed for good (a protocol error, refused credentials:
// reconnects never give up otherwise). A process in that state is a
// zombie; the binaries exit non-zero so that a supervisor starts a fresh
// one.
var ErrConnClosed = errors.New("toolpool: the NATS connection is closed for good")

// ServerConfig configures a Server. Zero fields take the documented
// defaults (WithDefaults); Validate names the field that is wrong.
type ServerConfig struct {
	// Conn is the NATS connection the workers pull and publish on.
	// Required. The Server does not close it.
	Conn *nats.Conn
	// Registry holds the tools served, at least one. Required.
	Registry *tools.Registry
	// StartEmpty lets the Server start with an empty Registry: its workers
	// pull nothing until Serve adds tools (a worker whose tools all come
	// from MCP servers that are not up yet).
	StartEmpty bool
	// Workers is how many workers pull on Conn. Default WorkersDefault.
	Workers int
	// Worker is each worker's configuration: Concurrency, DrainTimeout,
	// PublishRetryFor, WorkerID (with several workers, the i-th gets
	// "<WorkerID>-<i>"), AckWait and the rest, with package worker's
	// defaults. Its JetStream and Registry are set by the Server; so are
	// its History, Metrics and Logger unless given (a test's recorder).
	Worker worker.Config
	// History is the attempts bucket, opened (or created) at Start so that
	// dead letters carry every failed attempt. Best effort: when it cannot
	// be opened the workers run without it, and a warning is logged.
	History settle.HistoryConfig
	// NoHistory runs the workers without the attempts bucket.
	NoHistory bool
	// Discovery is the bucket the workers announce their tools in, so
	// that orchestrators route calls to them (package discovery).
	Discovery discovery.BucketConfig
	// NoAnnounce skips the announcements: for a pool whose orchestrator
	// has a fixed catalog (OrchestratorConfig.Catalog).
	NoAnnounce bool
	// Checks are more readiness checks that Handler's /readyz runs after
	// the Server's own (the catalog's MCP servers', say). They are not part
	// of Checks: an orchestrator in the same process stays ready without
	// them.
	Checks []health.Check
	// Metrics is the registry the workers' metrics are registered in.
	// Default: a registry of the Server's own, served by Handler.
	Metrics *metrics.Registry
	// Logger receives the Server's logs. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c ServerConfig) WithDefaults() ServerConfig {
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = metrics.NewRegistry()
	}
	return c
}

// Validate reports the first field of c that is wrong, by name.
func (c ServerConfig) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("toolpool: ServerConfig.Conn is required")
	case c.Registry == nil:
		return errors.New("toolpool: ServerConfig.Registry is required")
	case len(c.Registry.Names()) == 0 && !c.StartEmpty:
		return errors.New("toolpool: ServerConfig.Registry holds no tool: register at least one (or set StartEmpty)")
	case c.Workers < 1:
		return fmt.Errorf("toolpool: ServerConfig.Workers must be at least 1, got %d", c.Workers)
	case len(c.Worker.WorkerID) > worker.WorkerIDMaxBytes:
		return fmt.Errorf("toolpool: ServerConfig.Worker.WorkerID is %d bytes; the limit is %d", len(c.Worker.WorkerID), worker.WorkerIDMaxBytes)
	}
	return nil
}

// Server is what a worker process is: workers that pull the calls of the
// tools in a registry from JetStream, execute them and publish their
// results; the announcements that route calls to them; the attempt
// history that dead letters carry; their metrics and health. Create it
// with NewServer, then Start and Stop it.
type Server struct {
	cfg     ServerConfig
	js      js.JetStream
	metrics *metrics.Worker
	ready   atomic.Bool

	mu         sync.Mutex
	started    bool
	workers    []*worker.Worker
	announcers []*discovery.Announcer
	withheld   map[string]bool // tools of the registry not served (Unserve)
	// served are servedNames as of the last Start, Serve or Unserve: what
	// the readiness probe checks, without waiting for s.mu (held by Serve
	// while it binds consumers).
	served   atomic.Pointer[[]string]
	stopOnce sync.Once
	stopped  chan struct{}
	stopErr  error
}

// NewServer returns a Server for cfg, with defaults applied. It does not
// touch the network: Start does.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	j, err := js.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("toolpool: JetStream context: %w", err)
	}
	wc := cfg.Worker
	wc.JetStream, wc.Registry = j, cfg.Registry
	if err := wc.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("toolpool: ServerConfig.Worker: %w", err)
	}
	m, err := metrics.NewWorker(cfg.Metrics, metrics.WorkerOptions{Tools: cfg.Registry.Names()})
	if err != nil {
		return nil, fmt.Errorf("toolpool: worker metrics: %w", err)
	}
	s := &Server{cfg: cfg, js: j, metrics: m, stopped: make(chan struct{})}
	s.noteServed()
	return s, nil
}

// Start opens the attempt history, starts the workers and announces their
// tools. It returns once every worker pulls, or with the first error (the
// workers started are stopped again). Requests are bounded by ctx, or,
// when ctx has no deadline, by StartTimeoutDefault for the history and as
// much again for the workers.
func (s *Server) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("toolpool: server: already started")
	}
	s.started = true
	defer func() {
		if err != nil {
			s.stopAll(context.Background(), LostConnDrain)
		}
	}()
	history := s.cfg.Worker.History
	if history == nil && !s.cfg.NoHistory {
		// A bound of its own: a slow bucket must not eat the workers' time.
		hctx, cancel := startContext(ctx)
		h, err := settle.OpenHistory(hctx, s.js, s.cfg.History)
		cancel()
		if err != nil {
			s.cfg.Logger.Warn("no attempt history: dead letters will carry only their last attempt", "err", err)
		} else {
			history = h
		}
	}
	ctx, cancel := startContext(ctx)
	defer cancel()
	served := s.servedNames()
	for i := range s.cfg.Workers {
		wc := s.cfg.Worker
		wc.JetStream, wc.Registry, wc.History = s.js, s.cfg.Registry, history
		wc.Tools = served
		if wc.Metrics == nil {
			wc.Metrics = s.metrics
		}
		wc.Logger = cmp.Or(wc.Logger, s.cfg.Logger)
		if s.cfg.Workers > 1 {
			wc.Logger = wc.Logger.With("worker", i)
			if wc.WorkerID != "" {
				wc.WorkerID += "-" + strconv.Itoa(i)
			}
		}
		w, err := worker.New(wc)
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		s.workers = append(s.workers, w)
		if s.cfg.NoAnnounce {
			continue
		}
		a, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{
			JetStream: s.js, Registry: s.cfg.Registry, Tools: served, WorkerID: w.ID(), Bucket: s.cfg.Discovery, Logger: s.cfg.Logger,
			Slots: wc.WithDefaults().Concurrency, // the fleet's slots, for the orchestrators' fair-share window
		})
		if err != nil {
			return err
		}
		if err := a.Start(ctx); err != nil {
			return fmt.Errorf("announcing the tools: %w", err)
		}
		s.announcers = append(s.announcers, a)
	}
	s.noteServed()
	s.ready.Store(true)
	s.cfg.Logger.Info("workers started", "workers", s.cfg.Workers, "tools", served)
	return nil
}

// servedNames are the tools the workers serve: ServerConfig.Worker.Tools,
// or the registry's, less those withheld; s.mu is held.
func (s *Server) servedNames() []string {
	names := s.cfg.Worker.Tools
	if len(names) == 0 {
		names = s.cfg.Registry.Names()
	}
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return s.withheld[n] })
}

// noteServed records servedNames for servedNow; s.mu is held (or s is
// not shared yet).
func (s *Server) noteServed() {
	names := s.servedNames()
	s.served.Store(&names)
}

// servedNow are the tools served (or to be served by Start) as of the
// last change.
func (s *Server) servedNow() []string { return *s.served.Load() }

// Serve makes every worker of the Server serve the tools ts from now on
// (an MCP server added them, or came up late: catalog.MCPOptions), and
// announces them: a tool not in the registry is registered first; one the
// registry holds already (served before, withdrawn by Unserve) is served
// again as registered, and announced with ts's description and schema.
// Tools served already are reannounced. Before Start, Serve only registers
// them: Start serves them. It returns the first error (a tool the registry
// refuses, a consumer that cannot be bound); the tools before it are
// served.
func (s *Server) Serve(ctx context.Context, ts ...tools.Tool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopped:
		return errors.New("toolpool: server: stopped")
	default:
	}
	rts, err := scratchRegistered(ts)
	if err != nil {
		return fmt.Errorf("toolpool: serve: %w", err)
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		if _, ok := s.cfg.Registry.Lookup(t.Name); !ok {
			if err := s.cfg.Registry.Register(t); err != nil {
				return fmt.Errorf("toolpool: serve: %w", err)
			}
		}
		delete(s.withheld, t.Name)
		names = append(names, t.Name)
	}
	if len(s.cfg.Worker.Tools) > 0 {
		s.cfg.Worker.Tools = append(slices.DeleteFunc(s.cfg.Worker.Tools, func(n string) bool { return slices.Contains(names, n) }), names...)
	}
	s.metrics.AddTools(names...)
	defer s.noteServed() // also after an error: the tools before it are served
	for _, w := range s.workers {
		if err := w.Serve(ctx, names...); err != nil {
			return fmt.Errorf("toolpool: serve: %w", err)
		}
	}
	var errs []error
	for _, a := range s.announcers {
		errs = append(errs, a.Add(ctx, rts...))
	}
	if len(s.workers) > 0 {
		s.cfg.Logger.Info("serving tools", "tools", names)
	}
	return errors.Join(errs...)
}

// Unserve withdraws the announcements of the tools names, then makes every
// worker stop pulling their calls (an MCP server no longer offers them):
// calls the workers pulled but did not start go back to JetStream, to a
// worker that still serves the tool, or wait for one as calls of a tool
// no worker serves do; calls running finish. The registry keeps the tools
// (Serve serves them again). Tools not served are ignored. Before Start,
// the tools are left out of what Start serves.
func (s *Server) Unserve(ctx context.Context, names ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.withheld == nil {
		s.withheld = map[string]bool{}
	}
	for _, n := range names {
		s.withheld[n] = true
	}
	s.noteServed()
	var errs []error
	for _, a := range s.announcers {
		errs = append(errs, a.Withdraw(ctx, names...))
	}
	for _, w := range s.workers {
		errs = append(errs, w.Unserve(ctx, names...))
	}
	if len(s.workers) > 0 {
		s.cfg.Logger.Info("no longer serving tools", "tools", names)
	}
	return errors.Join(errs...)
}

// scratchRegistered are ts as registered tools of a registry of their own:
// what their announcements say.
func scratchRegistered(ts []tools.Tool) ([]*tools.Registered, error) {
	scratch := tools.NewRegistry()
	rts := make([]*tools.Registered, 0, len(ts))
	for _, t := range ts {
		if err := scratch.Register(t); err != nil {
			return nil, err
		}
		rt, _ := scratch.Lookup(t.Name)
		rts = append(rts, rt)
	}
	return rts, nil
}

// Stop withdraws the announcements (so that no new call is routed here),
// then stops the workers: the calls in flight may finish until ctx is
// done, then the rest are cancelled with worker.ErrShutdown and handed
// back to JetStream for another worker. With the NATS connection closed
// for good the calls get LostConnDrain at most. Stop returns nil when
// every call finished in time. It is idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ready.Store(false)
		s.stopErr = s.stopAll(ctx, 0)
		close(s.stopped)
	})
	return s.stopErr
}

// stopAll stops what Start started; drain, when positive, caps how long
// the calls in flight may finish.
func (s *Server) stopAll(ctx context.Context, drain time.Duration) error {
	for _, a := range s.announcers {
		actx, cancel := context.WithTimeout(ctx, WithdrawTimeoutDefault)
		if err := a.Stop(actx); err != nil {
			s.cfg.Logger.Warn("withdrawing the tools' announcements failed; they expire on their own", "err", err)
		}
		cancel()
	}
	if s.cfg.Conn.IsClosed() {
		drain = LostConnDrain
	}
	if drain > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, drain)
		defer cancel()
	}
	errs := make([]error, len(s.workers))
	var wg sync.WaitGroup
	for i, w := range s.workers {
		wg.Go(func() { errs[i] = w.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stopped is closed once Stop has returned.
func (s *Server) Stopped() <-chan struct{} { return s.stopped }

// Workers are the Server's workers, once started.
func (s *Server) Workers() []*worker.Worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*worker.Worker(nil), s.workers...)
}

// Conn is the connection the Server's workers use.
func (s *Server) Conn() *nats.Conn { return s.cfg.Conn }

// Checks are the Server's readiness checks: the consumers of the tools it
// serves at the time of the probe exist (not those Unserve withdrew),
// and the workers are started and not draining. Handler serves them with
// the connection's; an Orchestrator in the same process adds them to its
// own (OrchestratorConfig.Checks).
func (s *Server) Checks() []health.Check {
	return []health.Check{
		health.ConsumersOf(s.js, s.servedNow),
		health.Flag("worker", &s.ready, "the worker is starting or draining"),
	}
}

// Handler serves GET /metrics (the Server's registry), GET /healthz (503
// once the NATS connection is closed for good) and GET /readyz (NATS
// connected, streams present, Checks, ServerConfig.Checks).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(s.cfg.Metrics))
	checks := append([]health.Check{health.NATSConnected(s.cfg.Conn), health.Streams(s.js)}, s.Checks()...)
	health.New(0, append(checks, s.cfg.Checks...)...).
		WithLiveness(health.NATSNotClosed(s.cfg.Conn)).Register(mux)
	return mux
}

// startContext bounds ctx by StartTimeoutDefault when it has no deadline.
func startContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, StartTimeoutDefault)
}
