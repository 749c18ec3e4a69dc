package dlq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/internal/worker/settle"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// PoisonAdvisorySubject is the subject of the server's MAX_DELIVERIES
// advisories for every tool's consumer on TOOL_CALLS.
const PoisonAdvisorySubject = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + jetstream.StreamCalls + ".*"

// Defaults of PoisonConfig.
const (
	// PoisonTimeoutDefault bounds the handling of one poison call, and the
	// requests a sweep makes for one tool.
	PoisonTimeoutDefault = 30 * time.Second
	// PoisonSweepIntervalDefault is the time between two sweeps.
	PoisonSweepIntervalDefault = 15 * time.Second
	// PoisonSweepConfirmDefault is how long a sweep waits before it reads
	// a poison call it found again, to set it aside only if it is still
	// there.
	PoisonSweepConfirmDefault = 2 * time.Second
)

// AttemptLoader reads the attempts recorded for a call, by call key.
// *settle.History implements it.
type AttemptLoader interface {
	Load(ctx context.Context, key string) ([]settle.Attempt, error)
}

// PoisonConfig configures a PoisonWatcher. Zero fields take the defaults
// (WithDefaults); NewPoisonWatcher fills them and checks the rest.
type PoisonConfig struct {
	// Conn, when set, receives the MAX_DELIVERIES advisories (core NATS):
	// the fast path, which sets a poison call aside as soon as it reaches
	// MaxDeliver. Without it the watcher relies on sweeps alone, and then
	// SweepInterval must not be negative.
	Conn *nats.Conn
	// JetStream lists the tools' consumers, reads and deletes the call in
	// TOOL_CALLS and publishes the dead letter and the result. Required.
	JetStream js.JetStream
	// settle.History, when set, gives the dead letter whatever attempts were
	// recorded.
	History AttemptLoader
	// Logger receives what the watcher does. Default slog.Default().
	Logger *slog.Logger
	// Timeout bounds the handling of one poison call, and the requests a
	// sweep makes for one tool. Must not be negative. Default
	// PoisonTimeoutDefault (30s).
	Timeout time.Duration
	// SweepInterval is the time between two sweeps of TOOL_CALLS for poison
	// calls whose advisory was missed or whose handling failed; the first
	// sweep runs at start. Negative disables sweeping: a missed advisory
	// then leaves its call in TOOL_CALLS, undelivered.
	// Default PoisonSweepIntervalDefault (15s).
	SweepInterval time.Duration
	// SweepConfirm is how long a sweep waits between finding a poison call
	// and setting it aside, after checking again that it is still in
	// TOOL_CALLS and that its consumer is still done with it. On a cluster
	// an acked call can linger in the stream for an instant after its
	// consumer let go of it; a call still there after SweepConfirm is not
	// one of those. Must not be negative. Default PoisonSweepConfirmDefault
	// (2s).
	SweepConfirm time.Duration
	// Limits are the envelope limits the calls are decoded with. Default
	// envelope.DefaultLimits.
	Limits envelope.Limits
	// OnPoison, when set, is called after each poison call was handled. The
	// advisory path and the sweep call it from their own goroutines, so it
	// may be called concurrently.
	OnPoison func(PoisonCall)
}

// WithDefaults returns c with zero fields set to the defaults: a nil Logger
// is slog.Default().
func (c PoisonConfig) WithDefaults() PoisonConfig {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Timeout = cmp.Or(c.Timeout, PoisonTimeoutDefault)
	c.SweepInterval = cmp.Or(c.SweepInterval, PoisonSweepIntervalDefault)
	c.SweepConfirm = cmp.Or(c.SweepConfirm, PoisonSweepConfirmDefault)
	c.Limits = c.Limits.WithDefaults()
	return c
}

// validate names the first bad field of a config with its defaults.
func (c PoisonConfig) validate() error {
	switch {
	case c.JetStream == nil:
		return errors.New("dlq: PoisonConfig.JetStream is required")
	case c.Conn == nil && c.SweepInterval < 0:
		return errors.New("dlq: PoisonConfig.Conn is nil and SweepInterval is negative: the watcher would find nothing; set Conn or sweep")
	case c.SweepConfirm < 0:
		return fmt.Errorf("dlq: PoisonConfig.SweepConfirm is %v; want 0 (default %v) or more", c.SweepConfirm, PoisonSweepConfirmDefault)
	case c.Timeout < 0:
		return fmt.Errorf("dlq: PoisonConfig.Timeout is %v; want 0 (default %v) or more", c.Timeout, PoisonTimeoutDefault)
	}
	return nil
}

// ErrPoisonWatcherStopped is the cause given to the handling of poison calls
// still under way when the context of PoisonWatcher.Stop ends.
var ErrPoisonWatcherStopped = errors.New("dlq: poison watcher stopped")

// PoisonCall is what the watcher reports of a call it set aside
// (pooltype.PoisonCall).
type PoisonCall = pooltype.PoisonCall

// PoisonWatcher sets aside calls that reached their consumer's MaxDeliver
// without any worker reporting on them (the call kills the worker that
// runs it). For each it copies the call to TOOL_DLQ with reason poison,
// answers the caller with an is_error result (class internal, code
// poison), and removes the call from TOOL_CALLS, where JetStream would
// otherwise keep it undelivered forever.
//
// It finds them two ways. The server's MAX_DELIVERIES advisory is the fast
// path. Advisories are not stored, though: one sent while no watcher ran
// or while its connection was reconnecting is lost, and so is one whose
// handling failed. So the watcher also sweeps TOOL_CALLS at start and
// every SweepInterval. The server leaves a call that reached MaxDeliver in
// the stream, while acked calls are deleted (work-queue retention); so a
// call still queued on tools.call.<tool> that the consumer tool_<tool> has
// done with (at or below its ack floor, or, with nothing pending, at or
// below the last call it delivered) is a poison call. A sweep reads the
// first calls of each tool's subject, stops at the first one the consumer
// has not done with, and sets aside those still there, and still done
// with, SweepConfirm later. Usually that is one request per tool, and it
// finds nothing.
//
// Every orchestrator may run one: handling is idempotent (the dead letter
// and the result carry the call key as Nats-Msg-Id, and a call already
// removed is left alone).
type PoisonWatcher struct {
	startstop.Base

	cfg   PoisonConfig
	sub   *nats.Subscription // nil without Conn
	ch    chan *nats.Msg
	calls js.Stream
	// stopSweeps ends the sweeps when Stop begins: no sweep searches on.
	stopSweeps context.CancelFunc
	// loops are the advisory and sweep loops: Stop's drain waits for them
	// until its ctx ends.
	loops sync.WaitGroup

	mu       sync.Mutex
	handling map[uint64]bool // stream sequences being handled now

	sweepFailing bool         // the last sweep failed; owned by the sweeper
	sweeps       atomic.Int64 // sweeps finished, for tests
}

// NewPoisonWatcher checks cfg and returns a watcher. It does not touch the
// network: Start does.
func NewPoisonWatcher(cfg PoisonConfig) (*PoisonWatcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &PoisonWatcher{cfg: cfg, handling: map[uint64]bool{}}, nil
}

// Start subscribes to the advisories, starts sweeping and handles the
// poison calls it finds until Stop. ctx bounds the start only. A watcher
// starts once.
func (w *PoisonWatcher) Start(ctx context.Context) error {
	err := w.Base.Start(ctx, func(life context.Context) error { return w.start(ctx, life) })
	switch {
	case errors.Is(err, startstop.ErrStarted):
		return errors.New("dlq: poison watcher already started")
	case errors.Is(err, startstop.ErrStopped):
		return ErrPoisonWatcherStopped
	}
	return err
}

// start is Start's work. life is the parent of each poison call's
// handling: it ends, with ErrPoisonWatcherStopped, when the context of
// Stop ends.
func (w *PoisonWatcher) start(ctx, life context.Context) error {
	calls, err := w.cfg.JetStream.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		return fmt.Errorf("dlq: poison watcher: stream %s: %w", jetstream.StreamCalls, err)
	}
	w.calls = calls
	if w.cfg.Conn != nil {
		w.ch = make(chan *nats.Msg, 1024)
		w.sub, err = w.cfg.Conn.ChanSubscribe(PoisonAdvisorySubject, w.ch)
		if err != nil {
			return fmt.Errorf("dlq: poison watcher: subscribe: %w", err)
		}
		if err := w.cfg.Conn.FlushWithContext(ctx); err != nil {
			_ = w.sub.Unsubscribe()
			w.sub = nil
			return fmt.Errorf("dlq: poison watcher: subscribe: %w", err)
		}
		w.loops.Go(func() { w.run(life) })
	}
	sweeping, stopSweeps := context.WithCancel(life)
	w.stopSweeps = stopSweeps
	if w.cfg.SweepInterval > 0 {
		w.loops.Go(func() { w.sweepLoop(sweeping, life) })
	}
	w.Go(func(context.Context) { w.loops.Wait() }) // Stop returns once the loops have
	return nil
}

// Stop unsubscribes and stops sweeping, lets the poison calls being handled
// (and the advisories already received) finish until ctx ends, then cancels
// the rest with ErrPoisonWatcherStopped and waits for them. It returns nil
// when everything finished in time and ctx.Err() otherwise. It is safe to
// call more than once; the watcher cannot be started again.
func (w *PoisonWatcher) Stop(ctx context.Context) error {
	return w.Base.Stop(ctx, ErrPoisonWatcherStopped, w.drain)
}

// drain is Stop's first stage: no advisory comes in and no sweep begins
// any more; the loops finish what they hold until ctx ends.
func (w *PoisonWatcher) drain(ctx context.Context) error {
	w.stopSweeps()
	if w.sub != nil {
		_ = w.sub.Unsubscribe()
		close(w.ch)
	}
	done := make(chan struct{})
	go func() { w.loops.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run handles the advisories, each under life.
func (w *PoisonWatcher) run(life context.Context) {
	for m := range w.ch {
		if life.Err() != nil {
			continue // Stop gave up waiting: the rest is left to the next sweep
		}
		var adv struct {
			Stream     string    `json:"stream"`
			Consumer   string    `json:"consumer"`
			StreamSeq  uint64    `json:"stream_seq"`
			Deliveries uint64    `json:"deliveries"`
			Time       time.Time `json:"timestamp"`
		}
		if err := json.Unmarshal(m.Data, &adv); err != nil || adv.Stream != jetstream.StreamCalls ||
			!strings.HasPrefix(adv.Consumer, jetstream.ConsumerPrefix) || adv.StreamSeq == 0 {
			continue
		}
		if adv.Time.IsZero() {
			adv.Time = time.Now()
		}
		tool := strings.TrimPrefix(adv.Consumer, jetstream.ConsumerPrefix)
		ctx, cancel := context.WithTimeout(life, w.cfg.Timeout)
		pc, err := w.handleOnce(ctx, tool, adv.StreamSeq, int(adv.Deliveries), adv.Time)
		cancel()
		log := w.cfg.Logger.With("tool", tool, "stream_seq", adv.StreamSeq, "deliveries", adv.Deliveries)
		switch {
		case err != nil && w.cfg.SweepInterval > 0:
			log.Error("setting a poison call aside failed; the next sweep of "+jetstream.StreamCalls+" retries it",
				"err", err, "sweep_interval", w.cfg.SweepInterval)
		case err != nil:
			log.Error("setting a poison call aside failed; with sweeping off it stays in "+jetstream.StreamCalls+", undelivered", "err", err)
		case pc == nil:
			log.Debug("poison advisory for a call already gone")
		default:
			w.handled(log, *pc)
		}
	}
}

// handled logs a poison call set aside and reports it to OnPoison.
func (w *PoisonWatcher) handled(log *slog.Logger, pc PoisonCall) {
	log.Warn("poison call dead-lettered: it stopped the worker on every delivery", "call_id", pc.CallID, "swept", pc.Swept)
	if w.cfg.OnPoison != nil {
		w.cfg.OnPoison(pc)
	}
}

// handleOnce is handle, unless this watcher is handling the call at seq
// already (the advisory and a sweep found it at once): then it does nothing
// and returns nil, as for a call already gone.
func (w *PoisonWatcher) handleOnce(ctx context.Context, tool string, seq uint64, deliveries int, at time.Time) (*PoisonCall, error) {
	w.mu.Lock()
	busy := w.handling[seq]
	w.handling[seq] = true
	w.mu.Unlock()
	if busy {
		return nil, nil
	}
	defer func() {
		w.mu.Lock()
		delete(w.handling, seq)
		w.mu.Unlock()
	}()
	return w.handle(ctx, tool, seq, deliveries, at)
}

// handle sets aside the call at seq; nil and no error when it is gone.
func (w *PoisonWatcher) handle(ctx context.Context, tool string, seq uint64, deliveries int, at time.Time) (*PoisonCall, error) {
	// From the leader: a lagging replica could still hold a call acked since.
	m, err := jetstream.GetMsgFromLeader(ctx, w.cfg.JetStream, jetstream.StreamCalls, seq, "")
	if errors.Is(err, js.ErrMsgNotFound) {
		return nil, nil // acked late, or handled by another orchestrator
	}
	if err != nil {
		return nil, fmt.Errorf("get call %d: %w", seq, err)
	}
	pc := &PoisonCall{Tool: tool, StreamSeq: seq, Deliveries: deliveries}
	call, decodeErr := envelope.DecodeCall(m.Data, w.cfg.Limits)
	entry := settle.NewEntry(classify.FatePoison, tool, "", m.Data)
	entry.SourceSeq, entry.Deliveries = seq, deliveries
	entry.Error = fmt.Sprintf("every one of its %d deliveries ended without an answer: the worker running it stopped (crashed or was killed) each time", deliveries)
	entry.FirstFailure, entry.LastFailure = m.Time, at
	msgID := fmt.Sprintf("poison-%s-%d", jetstream.StreamCalls, seq)
	if decodeErr == nil {
		pc.CallID, entry.CallID, msgID = call.ID, call.ID, call.Key
		if w.cfg.History != nil {
			if as, err := w.cfg.History.Load(ctx, call.Key); err != nil {
				w.cfg.Logger.Warn("reading the poison call's attempts failed; dead-lettering it without them", "call_id", call.ID, "err", err)
			} else if len(as) > 0 {
				entry.Attempts = as
				entry.FirstFailure = as[0].Started
			}
		}
	}
	m2 := &poisonMsg{w: w, seq: seq}
	st := settle.Settlement{
		Verdict: classify.Policy{}.Decide(classify.Delivery{Case: classify.CasePoison, Attempt: deliveries}, nil),
		Letter:  &entry, LetterID: msgID,
	}
	if decodeErr == nil && call.ReplyTo != "" {
		m2.call = call
		if st.Result, err = envelope.EncodeResult(poisonResult(call, deliveries)); err != nil {
			return nil, err
		}
	}
	if err := settle.Settle(ctx, m2, st); err != nil {
		return nil, err
	}
	pc.Answered = st.Result != nil
	return pc, nil
}

// poisonResult is the poison call's is_error result for its caller.
func poisonResult(call *envelope.Call, deliveries int) *envelope.Result {
	return &envelope.Result{
		CallID: call.ID, Key: call.Key, Tool: call.Tool, IsError: true,
		Class: envelope.ClassInternal, Code: classify.CodePoison, Attempts: deliveries,
		Content: envelope.Text(classify.PoisonMessage(call.Tool, deliveries)),
	}
}

// poisonMsg is a poison call the watcher found by its stream sequence in
// TOOL_CALLS, with the verbs settle.Settle settles it by: no delivery holds it, so
// it leaves the stream by being deleted.
type poisonMsg struct {
	w    *PoisonWatcher
	seq  uint64
	call *envelope.Call // nil: no caller to answer
}

// PublishDeadLetter publishes the poison call's dead letter.
func (m *poisonMsg) PublishDeadLetter(ctx context.Context, e *settle.Entry, id string) error {
	dm, err := e.Msg(jetstream.DLQSubject(e.Tool), id)
	if err != nil {
		return err
	}
	_, err = m.w.cfg.JetStream.PublishMsg(ctx, dm)
	return err
}

// PublishResult publishes the poison call's is_error result to its caller.
func (m *poisonMsg) PublishResult(ctx context.Context, data []byte) error {
	if m.call == nil || m.call.ReplyTo == "" {
		return nil
	}
	msg := nats.NewMsg(jetstream.ResultSubject(m.call.ReplyTo, m.call.Key))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, jetstream.ResultMsgID(m.call.ReplyTo, m.call.Key))
	_, err := m.w.cfg.JetStream.PublishMsg(ctx, msg)
	return err
}

// Ack removes the call from TOOL_CALLS; a call already gone is no error.
func (m *poisonMsg) Ack(ctx context.Context) error {
	if err := deleteMsg(ctx, m.w.calls, m.seq); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// Nak refuses: no delivery holds the call, so it cannot be handed back.
func (m *poisonMsg) Nak(context.Context, time.Duration) error {
	return errors.New("dlq: a poison call found by its stream sequence cannot be handed back")
}

// Term removes the call from TOOL_CALLS, as Ack does.
func (m *poisonMsg) Term(ctx context.Context, _ string) error { return m.Ack(ctx) }
