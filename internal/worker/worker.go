package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// ErrShutdown is the cause (context.Cause) given to the contexts of calls
// still running when the context of a worker's Stop ends: their handlers
// see it, and the calls are handed back.
var ErrShutdown = errors.New("worker: shutting down")

// Worker pulls calls for its tools from TOOL_CALLS, executes them and
// publishes their results. Create one with New, then Run it (or Start and
// Stop it). Its lifecycle is a startstop.Base: its life, cancelled with
// ErrShutdown once Stop's drain is over, is the parent of every call's
// context.
type Worker struct {
	startstop.Base

	cfg Config
	js  js.JetStream
	// nc is the JetStream's connection once Start began: results are
	// published on it (publishSync); nil before (a job processed without
	// Start, as the package's tests do, publishes through js).
	nc *nats.Conn
	// acks publishes the results and matches their PubAcks once Start
	// bound the tools (resultAcks); nil before, or if its subscription
	// failed (then results go through publishSync).
	acks *resultAcks

	slots  *slots // one per call executing
	queued QueueMetrics
	pool   *goPool // runs calls and their handlers on reused goroutines
	// calls is the parent of every call's context: the worker's life once
	// Start began, context.Background() before (a job processed without
	// Start, as the package's tests do, runs with no shutdown).
	calls context.Context
	// draining is closed when Stop's drain begins: pulling ends, and a call
	// pulled from then on is handed back.
	draining chan struct{}
	// handBack is closed once pulling has ended: calls queued for a slot go
	// back.
	handBack chan struct{}
	// idle is closed once the worker is stopping (sealed) and nothing it
	// started runs any more: its pull loops and every call's processing
	// (Stopped).
	idle chan struct{}

	// pubCtx is the context result publishes share (publishContext).
	pubCtx    atomic.Pointer[publishCtx]
	pubCtxMu  sync.Mutex
	resultsMu sync.Mutex
	results   js.Stream // TOOL_RESULTS, once looked up: stored results
	// lookupFailed is set at the first failed look-up of a stored result.
	lookupFailed atomic.Bool

	mu       sync.Mutex
	pullCtx  context.Context    // parent of every tool's pull context
	stopPull context.CancelFunc // cuts off the pull loops' open pulls
	serving  map[string]*served // the tools pulled, by name (Serve, Unserve); nil until Start
	pulling  sync.WaitGroup     // the pull loops
	// jobs are the calls being processed; sealed is set once pulling has
	// ended for good, and no job is added any more: idle is closed when
	// the last one is gone.
	jobs   map[*job]struct{}
	sealed bool
	// seqs holds the jobs by the stream sequence of their call message:
	// a second delivery of a message this worker holds is dropped (see take).
	seqs map[uint64]*job
	// cancels holds the cancellations of messages this worker did not
	// hold when they came, by stream sequence (cancel.go).
	cancels   map[uint64]cancelNote
	cancelSub *nats.Subscription
}

// served is one tool this worker consumes.
type served struct {
	tool          *tools.Registered
	spec          jetstream.ConsumerSpec // to make the consumer again
	heartbeat     time.Duration          // InProgress interval: jetstream.HeartbeatFor(AckWait)
	maxAckPending int                    // the fleet-wide cap: no pull asks for more

	// Unserve: quit is closed to end the tool's pull loop, which closes
	// pulled when it has ended (its last pull drained); handBack is closed
	// then, and the tool's calls still queued for a slot go back. ctx is
	// the pull loop's, cut by cut when Unserve's context ends.
	quit     chan struct{}
	pulled   chan struct{}
	handBack chan struct{}
	ctx      context.Context
	cut      context.CancelFunc
	cons     js.Consumer // as bound; the pull loop may make it again
}

// quitting reports whether Unserve has ended the tool's pulling.
func (s *served) quitting() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// New checks cfg and returns a worker. It does not touch the network.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	queued, ok := cfg.Metrics.(QueueMetrics)
	if !ok {
		queued = nopMetrics{}
	}
	return &Worker{
		queued:   queued,
		cfg:      cfg,
		js:       cfg.JetStream,
		slots:    newSlots(cfg.Concurrency),
		pool:     newGoPool(),
		calls:    context.Background(),
		draining: make(chan struct{}),
		handBack: make(chan struct{}),
		idle:     make(chan struct{}),
		jobs:     make(map[*job]struct{}),
		seqs:     make(map[uint64]*job),
	}, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.WorkerID }

// Run starts the worker, serves until ctx is done, then stops it gracefully
// within Config.DrainTimeout. It returns nil after a clean shutdown.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), w.cfg.DrainTimeout)
	defer cancel()
	return w.Stop(stopCtx)
}

// Start creates or updates the consumers of the worker's tools and begins
// pulling. It returns once every consumer is bound. A worker starts once:
// a second Start fails, as does a Start after Stop; a Stop while Start
// binds makes it return ErrShutdown, having pulled nothing.
func (w *Worker) Start(ctx context.Context) error {
	err := w.Base.Start(ctx, func(life context.Context) error { return w.start(ctx, life) })
	switch {
	case errors.Is(err, startstop.ErrStarted):
		return fmt.Errorf("worker: %w", err)
	case errors.Is(err, startstop.ErrStopped):
		return fmt.Errorf("worker: %w; a worker cannot be started again", err)
	}
	return err
}

// start is Start's work: ctx bounds the binding, life is the worker's.
func (w *Worker) start(ctx, life context.Context) error {
	w.calls = life // before any pull: the jobs read it
	w.nc = w.js.Conn()
	names := w.cfg.Tools
	if len(names) == 0 {
		names = w.cfg.Registry.Names()
	}
	var all []*served
	for _, name := range names {
		s, err := w.bind(ctx, name)
		if err != nil {
			return err
		}
		all = append(all, s)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if life.Err() != nil {
		return context.Cause(life) // Stop came during Start: pull nothing
	}
	// Cancellations first: a call pulled from now on may be cancelled.
	w.subscribeCancels()
	w.matchResultAcks()
	w.pullCtx, w.stopPull = context.WithCancel(context.Background())
	w.serving = make(map[string]*served, len(all))
	for _, s := range all {
		w.startPull(s)
	}
	// slots: the calls this worker runs at once over all its tools (its
	// Concurrency, `worker --concurrency`), as the console and `tools
	// --workers` name it; a tool's own fleet-wide cap is another number.
	w.cfg.Logger.Info("worker started", "worker_id", w.cfg.WorkerID, "tools", names, "slots", w.cfg.Concurrency)
	return nil
}

// bind creates or updates the consumer of the registry's tool name.
func (w *Worker) bind(ctx context.Context, name string) (*served, error) {
	rt, ok := w.cfg.Registry.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("worker: tool %q is not in the registry", name)
	}
	spec := jetstream.ConsumerSpec{
		Tool:        rt.Name,
		Timeout:     rt.Timeout,
		MaxAttempts: rt.Retry.MaxAttempts,
		Concurrency: rt.Concurrency,
		AckWait:     w.cfg.AckWait,
	}
	cons, err := jetstream.EnsureConsumer(ctx, w.js, spec)
	if err != nil {
		return nil, fmt.Errorf("worker: bind tool %q: %w", name, err)
	}
	cfg := cons.CachedInfo().Config
	s := &served{tool: rt, spec: spec, heartbeat: jetstream.HeartbeatFor(cfg.AckWait), maxAckPending: cfg.MaxAckPending,
		quit: make(chan struct{}), pulled: make(chan struct{}), handBack: make(chan struct{}), cons: cons}
	if s.heartbeat <= 0 {
		s.heartbeat = jetstream.HeartbeatFor(jetstream.AckWaitDefault)
	}
	if s.maxAckPending <= 0 {
		s.maxAckPending = maxPull
	}
	return s, nil
}

// startPull starts s's pull loop; w.mu is held.
func (w *Worker) startPull(s *served) {
	s.ctx, s.cut = context.WithCancel(w.pullCtx)
	w.serving[s.tool.Name] = s
	w.pulling.Add(1)
	go w.pull(s.ctx, s.cons, s, w.cfg.Logger.With("tool", s.tool.Name))
}

// Serve makes a started worker serve more tools of its registry (tools
// registered after Start: an MCP server's list changed): it binds each
// tool's consumer and starts its pull loop, which pulls for the worker's
// free slots like the others. Tools already served are left as they are.
// It returns once every consumer is bound, or with the first error (the
// tools bound before it are served).
func (w *Worker) Serve(ctx context.Context, names ...string) error {
	for _, name := range names {
		w.mu.Lock()
		_, dup := w.serving[name]
		ok := w.serving != nil && !w.isDraining()
		w.mu.Unlock()
		switch {
		case !ok:
			return errors.New("worker: Serve needs a started worker that is not stopping")
		case dup:
			continue
		}
		s, err := w.bind(ctx, name)
		if err != nil {
			return err
		}
		w.mu.Lock()
		if w.isDraining() { // Stop waits for the pull loops started before it
			w.mu.Unlock()
			return errors.New("worker: Serve needs a started worker that is not stopping")
		}
		if _, dup := w.serving[name]; !dup {
			w.startPull(s)
			w.cfg.Logger.Info("serving a tool", "worker_id", w.cfg.WorkerID, "tool", name)
		}
		w.mu.Unlock()
	}
	return nil
}

// Unserve stops pulling the calls of the tools names (an MCP server no
// longer offers them): each tool's open pull is drained, and what it still
// brings goes back to JetStream for another worker, as do the tool's calls
// queued here for a slot, once the pull has ended; calls already running
// finish. When ctx ends first, the drains are cut short. A call of the tool
// that no worker serves waits in its consumer (as with no worker at all).
// Tools not served are ignored. The registry keeps the tools: Serve serves
// them again.
func (w *Worker) Unserve(ctx context.Context, names ...string) error {
	var gone []*served
	w.mu.Lock()
	for _, name := range names {
		if s, ok := w.serving[name]; ok {
			delete(w.serving, name)
			close(s.quit)
			gone = append(gone, s)
		}
	}
	w.mu.Unlock()
	var err error
	for _, s := range gone {
		select {
		case <-s.pulled:
		case <-ctx.Done():
			s.cut() // cuts its drain short
			<-s.pulled
			err = ctx.Err()
		}
		s.cut()
		close(s.handBack) // no pull of this tool is left at the server: queued calls may go back
		w.cfg.Logger.Info("no longer serving a tool", "worker_id", w.cfg.WorkerID, "tool", s.tool.Name)
	}
	return err
}

// Serving are the names of the tools the worker pulls, sorted.
func (w *Worker) Serving() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.serving))
}
