package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// PoisonAdvisorySubject is the subject of the server's MAX_DELIVERIES
// advisories for every tool's consumer on TOOL_CALLS.
const PoisonAdvisorySubject = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + jetstream.StreamCalls + ".*"

// PoisonTimeoutDefault bounds the handling of one advisory.
const PoisonTimeoutDefault = 30 * time.Second

// AttemptLoader reads the attempts recorded for a call. *History
// implements it.
type AttemptLoader interface {
	Load(ctx context.Context, callID string) ([]Attempt, error)
}

// PoisonConfig configures a PoisonWatcher. Zero fields take the defaults.
type PoisonConfig struct {
	// Conn receives the advisories (core NATS). Required.
	Conn *nats.Conn
	// JetStream reads and deletes the call in TOOL_CALLS and publishes the
	// dead letter and the result. Required.
	JetStream js.JetStream
	// History, when set, gives the dead letter whatever attempts were
	// recorded.
	History AttemptLoader
	// Logger receives what the watcher does. Default slog.Default().
	Logger *slog.Logger
	// Timeout bounds the handling of one advisory. Default
	// PoisonTimeoutDefault.
	Timeout time.Duration
	// Limits are the envelope limits the calls are decoded with. Default
	// envelope.DefaultLimits.
	Limits envelope.Limits
	// OnPoison, when set, is called after each poison call was handled.
	OnPoison func(PoisonCall)
}

// PoisonCall describes a call the watcher set aside.
type PoisonCall struct {
	Tool       string
	CallID     string // empty when the call did not decode
	StreamSeq  uint64 // where it was in TOOL_CALLS
	Deliveries int
	Answered   bool // an is_error result was published to its caller
}

// PoisonWatcher catches calls that reached their consumer's MaxDeliver
// without any worker reporting on them (the call kills the worker that
// runs it) from the server's MAX_DELIVERIES advisory. For each it copies
// the call to TOOL_DLQ with reason poison, answers the caller with an
// is_error result (class internal, code poison), and removes the call from
// TOOL_CALLS, where JetStream would otherwise keep it undelivered forever.
//
// Every orchestrator may run one: handling is idempotent (the dead letter
// and the result carry the call id as Nats-Msg-Id, and a call already
// removed is left alone). Advisories are not stored by the server: a call
// whose advisory came while no watcher ran stays in TOOL_CALLS, undelivered;
// `nats stream view TOOL_CALLS` shows it, and deleting it by hand is safe.
type PoisonWatcher struct {
	cfg   PoisonConfig
	sub   *nats.Subscription
	ch    chan *nats.Msg
	calls js.Stream
	done  chan struct{}
	once  sync.Once
}

// StartPoisonWatcher subscribes to the advisories and handles them until
// Stop.
func StartPoisonWatcher(ctx context.Context, cfg PoisonConfig) (*PoisonWatcher, error) {
	if cfg.Conn == nil || cfg.JetStream == nil {
		return nil, errors.New("dlq: PoisonConfig.Conn and PoisonConfig.JetStream are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = PoisonTimeoutDefault
	}
	calls, err := cfg.JetStream.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		return nil, fmt.Errorf("dlq: poison watcher: stream %s: %w", jetstream.StreamCalls, err)
	}
	w := &PoisonWatcher{cfg: cfg, ch: make(chan *nats.Msg, 1024), calls: calls, done: make(chan struct{})}
	w.sub, err = cfg.Conn.ChanSubscribe(PoisonAdvisorySubject, w.ch)
	if err != nil {
		return nil, fmt.Errorf("dlq: poison watcher: subscribe: %w", err)
	}
	if err := cfg.Conn.FlushWithContext(ctx); err != nil {
		_ = w.sub.Unsubscribe()
		return nil, fmt.Errorf("dlq: poison watcher: subscribe: %w", err)
	}
	go w.run()
	return w, nil
}

// Stop unsubscribes and waits for the advisory being handled, if any.
func (w *PoisonWatcher) Stop() {
	w.once.Do(func() {
		_ = w.sub.Unsubscribe()
		close(w.ch)
	})
	<-w.done
}

func (w *PoisonWatcher) run() {
	defer close(w.done)
	for m := range w.ch {
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
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
		pc, err := w.handle(ctx, tool, adv.StreamSeq, int(adv.Deliveries), adv.Time)
		cancel()
		log := w.cfg.Logger.With("tool", tool, "stream_seq", adv.StreamSeq, "deliveries", adv.Deliveries)
		switch {
		case err != nil:
			log.Error("setting a poison call aside failed; it stays in "+jetstream.StreamCalls+", undelivered", "err", err)
		case pc == nil:
			log.Debug("poison advisory for a call already gone")
		default:
			log.Warn("poison call dead-lettered: it stopped the worker on every delivery", "call_id", pc.CallID)
			if w.cfg.OnPoison != nil {
				w.cfg.OnPoison(*pc)
			}
		}
	}
}

// handle sets aside the call at seq; nil and no error when it is gone.
func (w *PoisonWatcher) handle(ctx context.Context, tool string, seq uint64, deliveries int, at time.Time) (*PoisonCall, error) {
	m, err := w.calls.GetMsg(ctx, seq)
	if errors.Is(err, js.ErrMsgNotFound) {
		return nil, nil // acked late, or handled by another orchestrator
	}
	if err != nil {
		return nil, fmt.Errorf("get call %d: %w", seq, err)
	}
	pc := &PoisonCall{Tool: tool, StreamSeq: seq, Deliveries: deliveries}
	call, decodeErr := envelope.DecodeCall(m.Data, w.cfg.Limits)
	entry := NewEntry(ReasonPoison, tool, "", m.Data)
	entry.SourceSeq, entry.Deliveries = seq, deliveries
	entry.Error = fmt.Sprintf("every one of its %d deliveries ended without an answer: the worker running it stopped (crashed or was killed) each time", deliveries)
	entry.FirstFailure, entry.LastFailure = m.Time, at
	msgID := fmt.Sprintf("poison-%s-%d", jetstream.StreamCalls, seq)
	if decodeErr == nil {
		pc.CallID, entry.CallID, msgID = call.ID, call.ID, call.ID
		if w.cfg.History != nil {
			if as, err := w.cfg.History.Load(ctx, call.ID); err != nil {
				w.cfg.Logger.Warn("reading the poison call's attempts failed; dead-lettering it without them", "call_id", call.ID, "err", err)
			} else if len(as) > 0 {
				entry.Attempts = as
				entry.FirstFailure = as[0].Started
			}
		}
	}
	dm, err := entry.Msg(jetstream.DLQSubject(tool), msgID)
	if err != nil {
		return nil, err
	}
	if _, err := w.cfg.JetStream.PublishMsg(ctx, dm); err != nil {
		return nil, fmt.Errorf("publish dead letter: %w", err)
	}
	if decodeErr == nil && call.ReplyTo != "" {
		if err := w.answer(ctx, call, deliveries); err != nil {
			return nil, fmt.Errorf("publish is_error result: %w", err)
		}
		pc.Answered = true
	}
	if err := deleteMsg(ctx, w.calls, seq); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	return pc, nil
}

// PoisonMessage is the is_error content of a poison call, for the model.
func PoisonMessage(tool string, deliveries int) string {
	return fmt.Sprintf("The tool %s stopped the worker running it on each of %d attempts, before it could answer, "+
		"so the call was set aside. Do not call it again with the same input; "+
		"try a different approach or answer from what you know.", tool, deliveries)
}

// answer publishes the poison call's is_error result to its caller.
func (w *PoisonWatcher) answer(ctx context.Context, call *envelope.Call, deliveries int) error {
	res := &envelope.Result{
		CallID: call.ID, Tool: call.Tool, IsError: true,
		Class: envelope.ClassInternal, Code: classify.CodePoison, Attempts: deliveries,
		Content: envelope.Text(PoisonMessage(call.Tool, deliveries)),
	}
	data, err := envelope.EncodeResult(res)
	if err != nil {
		return err
	}
	m := nats.NewMsg(jetstream.ResultSubject(call.ReplyTo))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, call.ID)
	_, err = w.cfg.JetStream.PublishMsg(ctx, m)
	return err
}
