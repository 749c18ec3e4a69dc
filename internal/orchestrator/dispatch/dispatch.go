package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolpool/toolpool/internal/pooltype"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// DefaultTimeoutDefault is how long a call waits for its result when the
// caller's context has no deadline.
const DefaultTimeoutDefault = 60 * time.Second

// ErrUnavailable is wrapped by Dispatch errors that mean the pool could not
// take the calls: JetStream did not store them (no responders, timeout,
// connection closed) within Config.PublishRetryFor or refused them, or the
// dispatcher is stopped or not started. An HTTP layer answers them with 503.
// It is pooltype.ErrUnavailable, which the HTTP client's errors match too.
var ErrUnavailable = pooltype.ErrUnavailable

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

// handleResult is the result consumer's handler. It runs on one goroutine,
// except for the moment the watchdog replaces the consumer, when the old
// one may still finish a message: everything it touches is safe for that.
func (d *Dispatcher) handleResult(msg js.Msg) {
	d.lastResult.Store(time.Now().UnixNano())
	d.deliverResult(msg.Subject(), msg.Data(), false)
}

// deliverResult decodes a result that came on subject and hands it to the
// waiters of its call key. watched says it came from a duplicate watch:
// then a result already delivered is not counted as a duplicate (the
// consumer may well have brought it too).
func (d *Dispatcher) deliverResult(subject string, data []byte, watched bool) {
	res, err := envelope.DecodeResult(data)
	if err != nil {
		d.log.Warn("dropping a malformed result", slog.String("subject", subject), slog.Any("error", err))
		return
	}
	// The subject names the call (tools.result.<instance>.<key>): a result
	// whose body names another call is not delivered to either, so a
	// publisher cannot answer one call with another's result.
	key := subject[strings.LastIndexByte(subject, '.')+1:]
	if res.Key != "" && res.Key != key {
		d.log.Warn("dropping a result whose key is not its subject's", slog.String("subject", subject), slog.String("key", res.Key))
		return
	}
	now := time.Now()
	outcome, tool, _ := d.calls.deliver(key, res, int64(len(data)), now, func(tool string, start time.Time) {
		d.metrics.ResultReceived(tool, res.Class, now.Sub(start))
	})
	if watched && outcome != outcomeDelivered {
		return
	}
	switch outcome {
	case outcomeLate:
		d.metrics.LateResult(tool)
		d.log.Debug("late result", slog.String("call_id", res.CallID), slog.String("tool", tool), slog.Int("attempt", res.Attempts))
	case outcomeDuplicate:
		d.metrics.DuplicateResult(tool)
		d.log.Debug("duplicate result", slog.String("call_id", res.CallID), slog.String("tool", tool), slog.Int("attempt", res.Attempts))
	default:
		d.log.Debug("result for an unknown call", slog.String("call_id", res.CallID), slog.String("tool", res.Tool))
	}
}

// Dispatch sends the calls of one assistant turn in parallel and returns their
// results in the calls' order.
//
// Every call gets a result: the tool's, or an is_error result the dispatcher
// writes itself for a call without an id, an unknown tool (nothing is
// published), an input that is not a JSON object or is too large, or a call
// with no result by the deadline (the ctx deadline, else DefaultTimeout).
// A call is identified by its key (envelope.CallKey): the tenant (see
// WithTenant), the session, the call id, the tool and the input. Calls are
// published with Nats-Msg-Id = key, so the same call dispatched twice runs
// once: a repeat waits for, or is answered from the cache with, the first
// one's result, and nothing else shares it (the same id with another input,
// session or tenant is another call). A call JetStream reports as a
// duplicate was published before, possibly by another orchestrator or by
// this one before a restart: its result is looked up in TOOL_RESULTS and
// awaited on tools.result.*.<key> (see watchDuplicate). When a tool has
// failed FailureThreshold times in a row in a session of a tenant, its
// is_error content tells the model to use a different approach; an empty
// session is not tracked.
//
// A call whose publish JetStream did not acknowledge (no responders while a
// stream leader is elected, a lost PubAck, a disconnect) is published again,
// same Nats-Msg-Id, with a jittered exponential backoff for up to
// Config.PublishRetryFor, so a short outage delays the turn instead of
// failing it.
//
// Dispatch returns an error, and no results, only when the turn cannot be
// handled as a whole: JetStream did not store a call (it refused it, or did
// not acknowledge it within PublishRetryFor or before the deadline), the
// dispatcher is not started or was stopped (errors wrapping ErrUnavailable),
// or ctx was cancelled. Calls published before such an error, other than
// a cancellation, still run; their results are kept a while, so
// dispatching the same calls again does not run them twice.
//
// A cancellation of ctx (not its deadline) before every call was answered
// cancels the calls left pool-wide (cancel.go): a call still queued is not
// run, a running one has its context cancelled on its worker with
// worker.ErrCancelled, and none is retried or dead-lettered; dispatching
// the same call again then runs it again. A ctx carrying a ProgressFunc
// (WithProgress) gets the progress its calls' tools report
// (tools.ReportProgress), with the calls' ids.
func (d *Dispatcher) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	d.turns.Add(1)
	defer d.leaveTurn()
	if !d.running.Load() {
		return nil, d.notRunningErr()
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	t := d.newTurn(ctx, session, calls)
	defer t.release()

	t.prepare()
	admitted, err := d.admit(t) // admission control: admission.go
	if err != nil {
		return nil, err
	}
	defer admitted()
	t.schedule() // fair shares: fair.go
	if err := t.publish(); err != nil {
		return nil, err
	}
	if err := t.wait(); err != nil {
		return nil, err
	}
	t.advise()
	return t.results, nil
}

// DispatchBlocks is Dispatch returning Anthropic tool_result blocks, in the
// calls' order.
func (d *Dispatcher) DispatchBlocks(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.ToolResultBlock, error) {
	results, err := d.Dispatch(ctx, session, calls)
	if err != nil {
		return nil, err
	}
	blocks := make([]envelope.ToolResultBlock, len(results))
	for i := range results {
		blocks[i] = results[i].ToolResult()
	}
	return blocks, nil
}

// slot states of a turn's calls.
const (
	slotAnswered = iota // results[i] is final
	slotWaiting         // registered in the call table: published or to publish
)

// slot is what a turn knows of one of its calls.
type slot struct {
	state uint8
	epoch uint32 // the call's cancellations before: its Nats-Msg-Id is callMsgID(key, epoch)
	seq   uint64 // the call message's sequence in TOOL_CALLS, once this turn stored it; 0 otherwise
	// published says the call was handed to the publisher.
	published bool
	// held says the call waits at the scheduler for its turn (fair.go);
	// tk is its place there while ticketed (from schedule to endTicket).
	held     bool
	ticketed bool
	tk       sched.Ticket
	// info is what the catalog's Lookup said of the tool.
	info ToolInfo
}

// turn is one Dispatch call in progress.
type turn struct {
	d        *Dispatcher
	ctx      context.Context
	tenant   string
	session  string
	calls    []envelope.ToolUseBlock
	keys     []string // call keys; "" for calls answered without publishing
	results  []envelope.Result
	slots    []slot
	payloads [][]byte
	ch       chan delivery // results from the consumer; room for every call

	now      time.Time
	deadline time.Time
	expiry   *time.Timer // the deadline, when ctx has none
	timer    *time.Timer // publish: PubAck timeouts, re-publishes, polls
	waiting  int         // slots registered in the table and not answered

	// traceparent is the W3C trace context of the turn's calls, in their
	// envelopes and in their messages' traceparent header.
	traceparent string

	// progress is the caller's ProgressFunc (WithProgress), nil when it
	// asked for none.
	progress ProgressFunc
	// cancelled is set when ctx was cancelled (not its deadline) before
	// every call was answered: release cancels the calls left pool-wide.
	cancelled bool
	// unacked are the calls whose publish was in flight when ctx was
	// cancelled: their sequence comes with their PubAck.
	unacked []unackedCall
	// scheduled says calls of the turn have scheduler tickets (fair.go);
	// held counts those waiting for their grant.
	scheduled bool
	held      int
	// admGens are the tools' queue-depth read generations when the turn
	// was admitted (admission.hold); nil when no depth is estimated.
	admGens map[string]uint64
}

func (d *Dispatcher) newTurn(ctx context.Context, session string, calls []envelope.ToolUseBlock) *turn {
	t := &turn{
		d:        d,
		ctx:      ctx,
		tenant:   TenantFrom(ctx),
		session:  session,
		calls:    calls,
		keys:     make([]string, len(calls)),
		results:  make([]envelope.Result, len(calls)),
		slots:    make([]slot, len(calls)),
		payloads: make([][]byte, len(calls)),
		ch:       make(chan delivery, chanRoom(d, len(calls))),
		now:      time.Now(),
		progress: ProgressFrom(ctx),
	}
	if dl, ok := ctx.Deadline(); ok {
		t.deadline = dl
	} else {
		t.deadline = t.now.Add(d.cfg.DefaultTimeout)
		t.expiry = time.NewTimer(d.cfg.DefaultTimeout)
	}
	return t
}

// prepare answers the calls that cannot run and registers the others in the
// call table; a call whose result is cached is answered from the cache.
func (t *turn) prepare() {
	d := t.d
	traceparent, ok := TraceparentFrom(t.ctx)
	if !ok {
		traceparent = NewTraceparent()
	}
	t.traceparent = traceparent
	var available []string // catalog names, listed once per turn if needed
	listed := false
	for i, c := range t.calls {
		if c.ID == "" {
			t.results[i] = missingIDResult(c.Name)
			d.rejected(c.Name, false, t.results[i].Code)
			continue
		}
		info, ok := d.cfg.Catalog.Lookup(t.ctx, c.Name)
		if !ok {
			if !listed {
				available, listed = d.cfg.Catalog.Names(t.ctx), true
			}
			if info.NoWorker {
				t.results[i] = noWorkerResult(c.ID, c.Name, available)
			} else {
				t.results[i] = unknownToolResult(c.ID, c.Name, available)
			}
			d.rejected(c.Name, info.NoWorker, t.results[i].Code)
			continue
		}
		input := bytes.TrimSpace(c.Input)
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		if len(input) > d.cfg.MaxInputBytes {
			t.results[i] = invalidInputResult(c.ID, c.Name,
				fmt.Sprintf("is %d bytes; the limit is %d bytes", len(input), d.cfg.MaxInputBytes))
			d.rejected(c.Name, true, t.results[i].Code)
			continue
		}
		key := envelope.CallKey(t.tenant, t.session, c.ID, c.Name, input)
		payload, err := envelope.EncodeCall(&envelope.Call{
			ID:          c.ID,
			Tool:        c.Name,
			Input:       input,
			Key:         key,
			Tenant:      t.tenant,
			Session:     t.session,
			ReplyTo:     d.cfg.Instance,
			CreatedAt:   t.now,
			Deadline:    t.deadline,
			Traceparent: traceparent,
		})
		if err != nil {
			t.results[i] = encodeErrorResult(c.ID, c.Name, err)
			d.rejected(c.Name, true, t.results[i].Code)
			continue
		}
		cached, ok, epoch := d.calls.registerEpoch(key, c.Name, waiter{ch: t.ch, idx: i, t: t}, t.now)
		if ok {
			t.results[i] = *cached
			t.results[i].Content = slices.Clone(cached.Content)
			continue
		}
		t.slots[i] = slot{state: slotWaiting, epoch: epoch, info: info}
		t.keys[i] = key
		t.payloads[i] = payload
		t.waiting++
	}
	if t.waiting > 0 {
		d.metrics.Pending(t.waiting)
	}
}

// encodeErrorResult answers a call the envelope refuses to encode.
func encodeErrorResult(id, tool string, err error) envelope.Result {
	var de *envelope.DecodeError
	if errors.As(err, &de) {
		if de.Field == "input" {
			return invalidInputResult(id, tool, de.Reason)
		}
		return errorResult(id, tool, envelope.ClassValidation, classify.CodeInvalidArgument,
			classify.RefusedFieldMessage(tool, de.Field, de.Reason))
	}
	return errorResult(id, tool, envelope.ClassInternal, classify.CodeInternal, classify.NotPreparedMessage(tool))
}

func (t *turn) expiryC() <-chan time.Time {
	if t.expiry == nil {
		return nil
	}
	return t.expiry.C
}

// wait collects the results of the published calls until all are in, the
// deadline passes (the rest are answered with is_error), ctx is cancelled
// or the dispatcher stops (errors).
func (t *turn) wait() error {
	d := t.d
	for t.waiting > 0 {
		select {
		case dl := <-t.ch:
			if dl.res != nil {
				t.answer(dl)
				continue
			}
			if err := t.granted(dl.idx); err != nil { // fair.go
				return err
			}
		case <-t.ctx.Done():
			if !errors.Is(t.ctx.Err(), context.DeadlineExceeded) {
				t.cancelled = true // release cancels the calls left
				return fmt.Errorf("dispatch: %w", t.ctx.Err())
			}
			t.expire()
		case <-t.expiryC():
			t.expire()
		case <-d.stopped:
			return fmt.Errorf("dispatch: %w", d.stoppedErr())
		}
	}
	return nil
}

func (t *turn) answer(dl delivery) {
	if t.slots[dl.idx].state == slotAnswered {
		return
	}
	t.results[dl.idx] = *dl.res
	t.results[dl.idx].Content = slices.Clone(dl.res.Content)
	t.slots[dl.idx].state = slotAnswered
	t.endTicket(dl.idx)
	t.waiting--
	t.d.metrics.Pending(-1)
}

// expire answers every call still waiting with a deadline is_error; a result
// that raced in before the call left the table is used instead.
func (t *turn) expire() {
	d := t.d
	now := time.Now()
	t.leaveAll(now)
	for {
		select {
		case dl := <-t.ch:
			if dl.res != nil { // a grant now is too late: endTicket releases it
				t.answer(dl)
			}
			continue
		default:
		}
		break
	}
	waited := t.deadline.Sub(t.now)
	// The held calls first: releasing one of the turn's granted calls
	// would unpark its key and grant a held one, which would then be told
	// it waited for its share instead of for the limit that held it.
	var held []bool
	for i := range t.calls {
		if t.slots[i].state == slotAnswered {
			continue
		}
		if h, ok := t.endHeld(i); ok {
			t.results[i] = t.heldResult(i, h) // fair.go
			d.heldExpired(t.calls[i].Name, t.results[i].Code)
			if held == nil {
				held = make([]bool, len(t.calls))
			}
			held[i] = true
		}
	}
	for i := range t.calls {
		if t.slots[i].state == slotAnswered {
			continue
		}
		c := t.calls[i]
		if held == nil || !held[i] {
			t.results[i] = deadlineResult(c.ID, c.Name, waited)
		}
		t.endTicket(i)
		t.slots[i].state = slotAnswered
		t.waiting--
		d.metrics.Pending(-1)
		d.metrics.Expired(c.Name)
		d.log.Debug("call expired", slog.String("call_id", c.ID), slog.String("tool", c.Name),
			slog.String("session", t.session), slog.String("traceparent", t.traceparent), slog.Duration("waited", waited))
	}
}

// leaveAll takes the turn's unanswered calls out of the call table.
func (t *turn) leaveAll(now time.Time) {
	for i := range t.calls {
		if t.slots[i].state != slotAnswered {
			t.d.calls.leave(t.keys[i], waiter{ch: t.ch, idx: i, t: t}, now)
		}
	}
}

// release stops the timer and, on the error paths, takes the calls still
// waiting out of the call table.
func (t *turn) release() {
	if t.expiry != nil {
		t.expiry.Stop()
	}
	if t.scheduled {
		for i := range t.slots {
			t.endTicket(i)
		}
	}
	if t.waiting > 0 {
		if t.cancelled {
			t.cancel(time.Now()) // cancel.go
		} else {
			t.leaveAll(time.Now())
		}
		t.d.metrics.Pending(-t.waiting)
		t.waiting = 0
	}
}

// sessionScope is the session tracker's name for session of tenant. A NUL
// cannot occur in a tenant (the envelope refuses control characters).
func sessionScope(tenant, session string) string {
	if tenant == "" {
		return session
	}
	return tenant + "\x00" + session
}

// advise updates the session's failure counts in the calls' order and adds
// the advice sentence to results of a tool that has failed too often.
func (t *turn) advise() {
	if t.session == "" || len(t.results) == 0 {
		return
	}
	outs := make([]outcome, len(t.results))
	for i := range t.results {
		outs[i] = outcome{tool: t.calls[i].Name, isError: t.results[i].IsError}
	}
	t.d.sessions.record(sessionScope(t.tenant, t.session), time.Now(), outs)
	for i := range outs {
		if o := outs[i]; o.isError && o.run >= t.d.cfg.FailureThreshold {
			t.results[i].Content = withSentence(t.results[i].Content, classify.RepeatedFailureMessage(o.tool, o.run))
		}
	}
}
