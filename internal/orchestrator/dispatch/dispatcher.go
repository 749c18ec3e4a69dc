package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/jetstream"
)

// ErrUnavailable is wrapped by Dispatch errors that mean the pool could not
// take the calls: JetStream did not store them (no responders, timeout,
// connection closed) within Config.PublishRetryFor or refused them, or the
// dispatcher is stopped or not started. An HTTP layer answers them with 503.
var ErrUnavailable = errors.New("tool pool unavailable")

// ErrStopped is wrapped, together with ErrUnavailable, by the errors of
// Dispatch calls that Stop ended or that came after it.
var ErrStopped = errors.New("dispatcher stopped")

// stopWait bounds how long Stop waits for the result consumer to wind down.
const stopWait = 5 * time.Second

// ToolInfo is what the dispatcher knows of a tool it may call
// (pooltype.ToolInfo).
type ToolInfo = pooltype.ToolInfo

// Catalog says which tools exist right now (pooltype.Catalog).
type Catalog = pooltype.Catalog

// Dispatcher publishes calls to TOOL_CALLS and hands each caller its results
// from TOOL_RESULTS. Create it with New, call Start before Dispatch and Stop
// when done. It is safe for concurrent use.
type Dispatcher struct {
	cfg     Config
	js      js.JetStream
	nc      *nats.Conn // js's connection: its last error tells of permission violations
	log     *slog.Logger
	metrics Metrics
	subject string                    // tools.result.<instance>.>
	results js.Stream                 // TOOL_RESULTS: stored results of re-posted calls
	queue   atomic.Pointer[js.Stream] // TOOL_CALLS, once a cancellation looked it up
	// progressSub receives the progress reports for this instance.
	progressSub *nats.Subscription
	watching    sync.Map // call key → struct{}: keys whose result a duplicate watch looks for
	watches     sync.WaitGroup
	life        context.Context // ends at Stop: bounds the duplicate watches' requests
	endLife     context.CancelFunc
	calls       *callTable
	sessions    *sessionTracker
	inflight    chan struct{}    // publish slots: MaxPublishInFlight
	adm         *admission       // admission control: admission.go
	sched       *sched.Scheduler // fair shares (fair.go); nil with NoFairness
	presence    *presence        // the other replicas and the stats requests (presence.go); nil with NoFairness

	mu      sync.Mutex
	started bool

	sub        atomic.Pointer[resultSub] // the result consumer; nil after a failed replacement
	subs       atomic.Int64              // result consumers made: numbers their names
	lastSeq    atomic.Uint64             // stream sequence of the last result handled
	lastResult atomic.Int64              // unix nanoseconds of the last result handled
	quietSince time.Time                 // the watchdog's: start or last replacement
	restarts   atomic.Int64              // result consumers made again by the watchdog
	kicked     chan string               // asks the watchdog to replace the consumer now
	watchDone  chan struct{}

	running  atomic.Bool   // started and not stopped
	draining atomic.Bool   // Stop was called: no new turn starts
	turns    atomic.Int64  // Dispatch calls in progress
	idle     chan struct{} // signalled when turns falls to 0 while draining
	stopped  chan struct{} // closed when Stop fails the turns left
	done     chan struct{} // closed when Stop has released everything
	stopOnce sync.Once
}

// New returns a Dispatcher for cfg, with defaults applied. It does not touch
// the network: Start does.
func New(cfg Config) (*Dispatcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.JS == nil {
		j, err := js.New(cfg.NC)
		if err != nil {
			return nil, fmt.Errorf("dispatch: create JetStream context: %w", err)
		}
		cfg.JS = j
	}
	var sc *sched.Scheduler
	if !cfg.NoFairness {
		var err error
		sc2 := sched.Config{Margin: cfg.WindowMargin, StaleMin: cfg.StaleAfter}
		if cfg.WindowMargin < 0 {
			sc2.MinMargin = -1 // the window is the slots
		}
		if sc, err = sched.New(sc2); err != nil {
			return nil, fmt.Errorf("dispatch: Config.WindowMargin: %w", err)
		}
	}
	life, endLife := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	return &Dispatcher{
		sched:    sc,
		life:     life,
		endLife:  endLife,
		cfg:      cfg,
		js:       cfg.JS,
		nc:       cfg.JS.Conn(),
		log:      cfg.Logger.With(slog.String("instance", cfg.Instance)),
		metrics:  cfg.Metrics,
		subject:  jetstream.ResultFilter(cfg.Instance),
		calls:    newCallTable(cfg.RecentTTL, cfg.RecentMax, cfg.RecentMaxBytes),
		sessions: newSessionTracker(cfg.MaxSessions, cfg.SessionTTL),
		inflight: make(chan struct{}, cfg.MaxPublishInFlight),
		adm:      newAdmission(cfg, sc, stopped),
		stopped:  stopped,
		done:     make(chan struct{}),
		idle:     make(chan struct{}, 1),
		kicked:   make(chan string, 1),
	}, nil
}

// Instance is the orchestrator instance id: results come on
// tools.result.<Instance>.<key>.
func (d *Dispatcher) Instance() string { return d.cfg.Instance }

// Start begins consuming results from TOOL_RESULTS on
// tools.result.<instance>.>. It returns once the consumer exists, so a call
// dispatched after Start cannot miss its result.
//
// The consumer is an ephemeral consumer without acks starting after the
// stream's last message, not a durable one. The table of waiting callers
// lives in this process's memory, so after a restart no one waits for older
// results and replaying them would serve nobody. A consumer without acks
// needs half the messages of an acked one, and an ephemeral one leaves no
// state behind for instance ids that never come back (the server deletes
// it after five minutes without pulls). When it loses results (a
// disconnect) or stops delivering, a watchdog makes a new one starting
// after the last result handled, so results stored meanwhile are still
// delivered (see Config.ResultCheckInterval). TOOL_RESULTS must not be a
// work-queue stream (those refuse consumers without acks).
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.stopped:
		return fmt.Errorf("dispatch: start: %w", d.stoppedErr())
	default:
	}
	if d.started {
		return errors.New("dispatch: start: already started")
	}
	// Start after the stream's last message rather than with DeliverNew:
	// a consumer made again later starts after the last result handled,
	// a sequence too.
	stream, err := d.js.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		return fmt.Errorf("dispatch: start: stream %s: %w: %w", jetstream.StreamResults, ErrUnavailable, err)
	}
	d.results = stream
	info := stream.CachedInfo()
	d.lastSeq.Store(info.State.LastSeq)
	if err := d.subscribeProgress(); err != nil {
		return fmt.Errorf("dispatch: start: progress reports: %w: %w", ErrUnavailable, err)
	}
	if d.sched != nil {
		p, err := d.startPresence()
		if err != nil {
			_ = d.progressSub.Unsubscribe()
			return fmt.Errorf("dispatch: start: scheduler presence: %w: %w", ErrUnavailable, err)
		}
		d.presence = p
	}
	s, err := d.subscribeResults(ctx, info.State.LastSeq+1)
	if err != nil {
		_ = d.progressSub.Unsubscribe()
		if d.presence != nil {
			d.presence.stop()
		}
		return fmt.Errorf("dispatch: start: %w: %w", ErrUnavailable, err)
	}
	d.sub.Store(s)
	d.started = true
	d.quietSince = time.Now()
	d.running.Store(true)
	if d.cfg.ResultCheckInterval > 0 {
		d.watchDone = make(chan struct{})
		go d.watchResults()
	}
	d.log.Debug("dispatcher started", slog.String("subject", d.subject))
	return nil
}

// Stop stops the dispatcher in two stages. First it drains: new turns
// fail at once (errors wrapping ErrStopped and ErrUnavailable) while the
// turns in progress go on until they end or ctx is done. Then it cancels:
// every turn still waiting fails with ErrStopped, the result consumer stops
// and results that arrive later are not consumed. Stop returns nil when
// every turn ended in time, and ctx's cause otherwise. It is idempotent;
// Dispatch after Stop fails as above.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	d.draining.Store(true)
	d.running.Store(false)
	d.mu.Unlock()
	var err error
	for err == nil && d.turns.Load() > 0 {
		select {
		case <-d.idle:
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
	}
	d.stop()
	return err
}

// Stopped is closed once Stop has failed the turns left and released the
// result consumer.
func (d *Dispatcher) Stopped() <-chan struct{} { return d.done }

// leaveTurn ends a Dispatch call begun with d.turns.Add(1).
func (d *Dispatcher) leaveTurn() {
	if d.turns.Add(-1) == 0 && d.draining.Load() {
		select {
		case d.idle <- struct{}{}:
		default:
		}
	}
}

// stop is Stop's second stage.
func (d *Dispatcher) stop() {
	d.stopOnce.Do(func() {
		defer close(d.done)
		d.mu.Lock()
		d.running.Store(false)
		close(d.stopped)
		d.endLife()
		watchDone := d.watchDone
		d.mu.Unlock()
		defer d.watches.Wait() // they end on stopped
		if d.progressSub != nil {
			_ = d.progressSub.Unsubscribe()
		}
		if d.presence != nil {
			d.presence.stop()
		}
		if d.sched != nil {
			d.sched.Close()
		}
		if watchDone != nil {
			<-watchDone // every wait of the watchdog is bounded; it may have swapped d.sub
		}
		s := d.sub.Swap(nil)
		if s == nil {
			return
		}
		s.cc.Stop()
		t := time.NewTimer(stopWait)
		defer t.Stop()
		select {
		case <-s.cc.Closed():
		case <-t.C:
			d.log.Warn("result consumer did not stop in time")
		}
		d.deleteResults(s)
	})
}

func (d *Dispatcher) stoppedErr() error {
	return fmt.Errorf("%w: %w", ErrUnavailable, ErrStopped)
}

func (d *Dispatcher) notRunningErr() error {
	if d.draining.Load() {
		return fmt.Errorf("dispatch: %w", d.stoppedErr())
	}
	select {
	case <-d.stopped:
		return fmt.Errorf("dispatch: %w", d.stoppedErr())
	default:
		return fmt.Errorf("dispatch: %w: dispatcher not started", ErrUnavailable)
	}
}

// background runs f on a goroutine Stop waits for, and reports whether it
// did: not once Stop has begun (Stop closes stopped under mu and then waits
// for these goroutines: none may be added after that).
func (d *Dispatcher) background(f func()) bool {
	d.mu.Lock()
	select {
	case <-d.stopped:
		d.mu.Unlock()
		return false
	default:
	}
	d.watches.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.watches.Done()
		f()
	}()
	return true
}
