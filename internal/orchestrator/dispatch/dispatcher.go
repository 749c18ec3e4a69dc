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
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/jetstream"
)

// ErrUnavailable is wrapped by Dispatch errors that mean the pool could not
// take the calls: JetStream did not store them (no responders, timeout,
// connection closed) within Config.PublishRetryFor or refused them, or the
// dispatcher is stopped or not started. An HTTP layer answers them with 503.
var ErrUnavailable = pooltype.ErrUnavailable

// ErrStopped is wrapped, together with ErrUnavailable, by the errors of
// Dispatch calls that Stop ended or that came after it. It is also the
// cause of the dispatcher's life (startstop.Base) once Stop has drained.
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
	// Base is the dispatcher's lifecycle: Start once, Stop in two stages
	// (drain the turns, then end the life with ErrStopped), Stopped.
	startstop.Base

	cfg     Config
	js      js.JetStream
	nc      *nats.Conn // js's connection: its last error tells of permission violations
	acks    *pubAcks   // publishes the calls and takes their PubAcks; nil without nc (js.PublishMsgAsync then)
	log     *slog.Logger
	metrics Metrics
	subject string                    // tools.result.<instance>.>
	results js.Stream                 // TOOL_RESULTS: stored results of re-posted calls
	queue   atomic.Pointer[js.Stream] // TOOL_CALLS, once a cancellation looked it up
	// progressSub receives the progress reports for this instance.
	progressSub *nats.Subscription
	watching    sync.Map // call key → struct{}: keys whose result a duplicate watch looks for
	calls       *callTable
	sessions    *sessionTracker
	advice      *fleetAdvice     // the counts shared with the other replicas (advice.go); nil before Start
	inflight    chan struct{}    // publish slots: MaxPublishInFlight
	adm         *admission       // admission control: admission.go
	sched       *sched.Scheduler // fair shares (fair.go); nil with NoFairness

	// turns lets Dispatch calls in from Start to Stop, and drains them.
	turns turnGate
	// ended is the Done channel of the dispatcher's life, set by Start
	// before it lets turns in: turns select on it, and Base.Life takes a
	// lock.
	ended <-chan struct{}
	// tasks are the goroutines turns leave behind (background.go).
	tasks background

	// feed is the result consumer and its watchdog (resultwatch.go).
	feed resultFeed
	// recovery is the window after a (re)connection in which calls are
	// looked up in TOOL_RESULTS before they are published (recovery.go).
	recovery recovery
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
	d := &Dispatcher{
		sched:    sc,
		cfg:      cfg,
		js:       cfg.JS,
		nc:       cfg.JS.Conn(),
		log:      cfg.Logger.With(slog.String("instance", cfg.Instance)),
		metrics:  cfg.Metrics,
		subject:  jetstream.ResultFilter(cfg.Instance),
		calls:    newCallTable(cfg.RecentTTL, cfg.RecentMax, cfg.RecentMaxBytes),
		sessions: newSessionTracker(cfg.MaxSessions, cfg.SessionTTL),
		inflight: make(chan struct{}, cfg.MaxPublishInFlight),
		feed:     resultFeed{kicked: make(chan string, 1)},
	}
	d.turns.idle = make(chan struct{}, 1)
	d.adm = newAdmission(cfg, sc, d.Life)
	return d, nil
}

// Instance is the orchestrator instance id: results come on
// tools.result.<Instance>.<key>.
func (d *Dispatcher) Instance() string { return d.cfg.Instance }

// ResultConsumer is the name of the consumer on TOOL_RESULTS the
// dispatcher takes its results from now; "" before Start and while a
// replacement is being made.
func (d *Dispatcher) ResultConsumer() string {
	if s := d.current(); s != nil {
		return s.Name()
	}
	return ""
}

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
//
// A second Start fails (startstop.ErrStarted), and so does a Start after
// Stop (ErrStopped and ErrUnavailable) or after a Start that failed.
func (d *Dispatcher) Start(ctx context.Context) error {
	err := d.Base.Start(ctx, func(life context.Context) error { return d.start(ctx, life) })
	switch {
	case errors.Is(err, startstop.ErrStopped):
		return fmt.Errorf("dispatch: start: %w", d.stoppedErr())
	case errors.Is(err, startstop.ErrStarted):
		return fmt.Errorf("dispatch: start: %w", err)
	}
	return err
}

// start is Start's work: the result stream, the progress subscription, the
// presence of fair shares and the result consumer, bounded by ctx; then
// launch. What it set up before a failure is undone, or ends with the
// life, which the failure ends.
func (d *Dispatcher) start(ctx, life context.Context) error {
	// Start after the stream's last message rather than with DeliverNew:
	// a consumer made again later starts after the last result handled,
	// a sequence too.
	stream, err := d.js.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		return fmt.Errorf("dispatch: start: stream %s: %w: %w", jetstream.StreamResults, ErrUnavailable, err)
	}
	d.results = stream
	info := stream.CachedInfo()
	d.openRecovery(info, time.Now())
	d.feed.lastSeq.Store(info.State.LastSeq)
	if err := d.subscribeProgress(); err != nil {
		return fmt.Errorf("dispatch: start: progress reports: %w: %w", ErrUnavailable, err)
	}
	if d.sched != nil {
		if err := d.startPresence(); err != nil { // announces until the life ends
			_ = d.progressSub.Unsubscribe()
			return fmt.Errorf("dispatch: start: scheduler presence: %w: %w", ErrUnavailable, err)
		}
	}
	if d.nc != nil {
		if d.acks, err = newPubAcks(d.nc); err != nil {
			_ = d.progressSub.Unsubscribe()
			return fmt.Errorf("dispatch: start: PubAck subscription: %w: %w", ErrUnavailable, err)
		}
	}
	s, err := d.subscribeResults(ctx, info.State.LastSeq+1)
	if err != nil {
		_ = d.progressSub.Unsubscribe()
		if d.acks != nil {
			d.acks.close()
		}
		return fmt.Errorf("dispatch: start: %w: %w", ErrUnavailable, err)
	}
	d.feed.sub.Store(s)
	d.feed.quietSince = time.Now()
	if d.nc != nil {
		if err := d.startAdvice(); err != nil { // not fatal: each replica counts alone
			d.log.Warn("sharing the repeated-failure counts with other replicas failed", slog.Any("error", err))
		}
	}
	if d.acks != nil {
		d.Go(d.acks.run)
	}
	if d.nc != nil {
		d.Go(d.watchReconnects) // recovery.go
	}
	d.launch(life)
	d.log.Debug("dispatcher started", slog.String("subject", d.subject))
	return nil
}

// launch lets turns in, with the dispatcher's life, and starts run: the
// end of a Start whose network part succeeded.
func (d *Dispatcher) launch(life context.Context) {
	d.ended = life.Done()
	d.Go(d.run)
	d.turns.openUp()
}

// run is the dispatcher's goroutine from Start to Stop: the result
// consumer's watchdog (unless Config.ResultCheckInterval is negative) until
// the life ends, then teardown.
func (d *Dispatcher) run(life context.Context) {
	if d.cfg.ResultCheckInterval > 0 {
		d.watchResults(life)
	} else {
		<-life.Done()
	}
	d.teardown()
}

// Stop stops the dispatcher in two stages. First it drains: new turns
// fail at once (errors wrapping ErrStopped and ErrUnavailable) while the
// turns in progress go on until they end or ctx is done. Then it cancels:
// every turn still waiting fails with ErrStopped, the result consumer stops
// and results that arrive later are not consumed. Stop returns nil when
// every turn ended in time, and ctx's cause otherwise. It is idempotent: a
// second Stop waits for the first and returns its error; Dispatch after
// Stop fails as above. Stopped is closed once Stop has released everything.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.turns.shut() // at once, even while Base.Stop waits for a Start to return
	return d.Base.Stop(ctx, ErrStopped, d.drain)
}

// drain is Stop's first stage: it waits for the turns in progress.
func (d *Dispatcher) drain(ctx context.Context) error {
	d.turns.shut() // again: a Start that Stop waited for has let turns in
	return d.turns.wait(ctx)
}

// teardown undoes what Start set up, once the life is over (the turns left
// have failed) and the watchdog has returned (it may have replaced the
// result consumer). The presence ends on its own with the life.
func (d *Dispatcher) teardown() {
	d.tasks.close()
	defer d.tasks.wait() // they end with the life
	if d.progressSub != nil {
		_ = d.progressSub.Unsubscribe()
	}
	d.advice.stop()
	if d.sched != nil {
		d.sched.Close()
	}
	s := d.feed.sub.Swap(nil)
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
}

func (d *Dispatcher) stoppedErr() error {
	return fmt.Errorf("%w: %w", ErrUnavailable, ErrStopped)
}

// notRunningErr is the error of a turn the gate refused.
func (d *Dispatcher) notRunningErr() error {
	if d.turns.stopping() {
		return fmt.Errorf("dispatch: %w", d.stoppedErr())
	}
	return fmt.Errorf("dispatch: %w: dispatcher not started", ErrUnavailable)
}
