package dlq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Defaults of ReplayConfig.
const (
	// ReplayTimeoutDefault is a replayed call's deadline, from its publish.
	ReplayTimeoutDefault = 10 * time.Minute
	// ReplayPublishTimeoutDefault bounds the wait for a replayed call's
	// PubAck.
	ReplayPublishTimeoutDefault = 10 * time.Second
)

// ErrNotReplayable matches (with errors.Is) the error for a dead letter
// that holds no call to replay: a malformed call, or a body that is not an
// entry.
var ErrNotReplayable = errors.New("dlq: the dead letter holds no call that can be replayed")

// ReplayConfig configures Store.Replay. Zero fields take the defaults.
type ReplayConfig struct {
	// Rate caps the calls republished per second. Default 0: no cap.
	Rate float64
	// Timeout is each replayed call's deadline, counted from its publish.
	// Default ReplayTimeoutDefault.
	Timeout time.Duration
	// ReplyTo is the instance whose result subjects (tools.result.<ReplyTo>.>)
	// gets the replayed calls' results. Default "": no results are
	// published.
	ReplyTo string
	// DryRun reports what would be replayed and changes nothing.
	DryRun bool
	// PublishTimeout bounds each wait for a PubAck. Default
	// ReplayPublishTimeoutDefault.
	PublishTimeout time.Duration
	// Limits are the envelope limits the stored calls are decoded with.
	// Default envelope.DefaultLimits.
	Limits envelope.Limits
	// Tracer, when on, gives each replay a span "replay <tool>" linked to
	// the dead letter's trace, and the replayed call its context: the new
	// attempts are in a trace of their own, linked to the original one
	// (replaytrace.go). Default nil: the replayed call keeps the dead
	// letter's traceparent.
	Tracer *tracing.Tracer
}

// Replayed is what happened to one dead letter in Store.Replay.
type Replayed struct {
	// Seq is the dead letter's sequence in TOOL_DLQ.
	Seq uint64
	// Tool is the call's tool.
	Tool string
	// Reason is why the call was dead-lettered.
	Reason classify.Fate
	// OriginalID is the id of the call as the model made it (before any
	// replay).
	OriginalID string
	// NewID is the replayed call's id (ReplayID).
	NewID string
	// Duplicate is set when TOOL_CALLS had the new id already: an earlier
	// replay published it and stopped before removing the dead letter.
	Duplicate bool
	// Err is set when the letter was skipped: it was gone (ErrNotFound),
	// holds no call (ErrNotReplayable), or publishing or removing failed.
	Err error
}

// ReplayID is the id of the replay of the call originalID from the dead
// letter at seq: "<originalID>-r<seq>". It depends on nothing else, so a
// replay run again after a crash publishes the same id and so the same call
// key, which TOOL_CALLS deduplicates within its duplicate window.
func ReplayID(originalID string, seq uint64) string {
	return originalID + "-r" + strconv.FormatUint(seq, 10)
}

// ReplayCall is the call that replays the call in e, dead-lettered at seq:
// the same tool, input, tenant, session and trace, a new id (ReplayID of the
// original id) and so a new key, OriginalID set, created now with the deadline now+timeout,
// and replyTo as its reply_to.
func ReplayCall(e *settle.Entry, seq uint64, now time.Time, timeout time.Duration, replyTo string, lim envelope.Limits) (*envelope.Call, error) {
	if e == nil || len(e.Call) == 0 {
		return nil, ErrNotReplayable
	}
	call, err := envelope.DecodeCall(e.Call, lim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotReplayable, err)
	}
	orig := call.OriginalID
	if orig == "" {
		orig = call.ID
	}
	call.ID = ReplayID(orig, seq)
	call.Key = call.CallKey() // a new id is a new call
	call.OriginalID = orig
	call.CreatedAt = now
	call.Deadline = now.Add(timeout)
	call.ReplyTo = replyTo
	return call, nil
}

// Replay republishes the calls of the dead letters at seqs, in that order,
// at most cfg.Rate per second, and reports each to fn (which may be nil).
// A letter leaves TOOL_DLQ only once JetStream acknowledged its call, so
// a crash during Replay loses nothing; the call's id is deterministic
// (ReplayID), so running Replay again after such a crash does not run a
// call twice as long as it runs within TOOL_CALLS's duplicate window
// (2 minutes by default) of the crash.
//
// Letters that are gone or hold no call are skipped and reported with Err.
// Replay stops at the first failure to publish or remove (returned, and
// reported), or when ctx ends. It returns how many calls it replayed.
func (s *Store) Replay(ctx context.Context, seqs []uint64, cfg ReplayConfig, fn func(Replayed)) (int, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = ReplayTimeoutDefault
	}
	if cfg.PublishTimeout == 0 {
		cfg.PublishTimeout = ReplayPublishTimeoutDefault
	}
	if cfg.Timeout < 0 || cfg.PublishTimeout < 0 || cfg.Rate < 0 {
		return 0, errors.New("dlq: ReplayConfig: Timeout, PublishTimeout and Rate must not be negative")
	}
	if fn == nil {
		fn = func(Replayed) {}
	}
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	var timer *time.Timer
	next := time.Now()
	n := 0
	for _, seq := range seqs {
		if interval > 0 && !cfg.DryRun {
			if wait := time.Until(next); wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
					defer timer.Stop()
				} else {
					timer.Reset(wait)
				}
				select {
				case <-ctx.Done():
					return n, ctx.Err()
				case <-timer.C:
				}
			}
			if now := time.Now(); now.After(next) {
				next = now // no burst after a slow step
			}
			next = next.Add(interval)
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		r, err := s.replayOne(ctx, seq, cfg)
		fn(r)
		if err != nil {
			return n, err
		}
		if r.Err == nil && !cfg.DryRun {
			n++
		}
	}
	return n, nil
}

// replayOne replays one letter. Its error stops Replay; r.Err alone skips
// the letter.
func (s *Store) replayOne(ctx context.Context, seq uint64, cfg ReplayConfig) (r Replayed, err error) {
	r.Seq = seq
	l, err := s.Get(ctx, seq)
	if err != nil {
		r.Err = err
		if errors.Is(err, ErrNotFound) {
			return r, nil
		}
		return r, err
	}
	r.Tool, r.Reason = l.Tool(), l.Reason()
	call, err := ReplayCall(l.Entry, seq, time.Now(), cfg.Timeout, cfg.ReplyTo, cfg.Limits)
	if err != nil {
		if l.Err != nil {
			err = fmt.Errorf("%w: %w", ErrNotReplayable, l.Err)
		}
		r.Err = err
		return r, nil
	}
	r.Tool, r.OriginalID, r.NewID = call.Tool, call.OriginalID, call.ID
	if cfg.DryRun {
		return r, nil
	}
	var span trace.Span
	if cfg.Tracer.On() {
		span = startReplaySpan(ctx, cfg.Tracer, call, seq) // replaytrace.go
		defer func() { endReplaySpan(span, r, err) }()
	}
	data, err := envelope.EncodeCall(call)
	if err != nil {
		r.Err = fmt.Errorf("%w: %w", ErrNotReplayable, err)
		return r, nil
	}
	m := nats.NewMsg(jetstream.CallSubject(call.Tool))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, call.Key)
	if span != nil && call.Traceparent != "" {
		m.Header.Set(envelope.HeaderTraceparent, call.Traceparent)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.PublishTimeout)
	ack, err := s.js.PublishMsg(pctx, m)
	cancel()
	if err != nil {
		r.Err = fmt.Errorf("dlq: republish dead letter %d as call %s: %w", seq, call.ID, err)
		return r, r.Err
	}
	r.Duplicate = ack.Duplicate
	if span != nil {
		span.AddEvent("published", trace.WithAttributes(attrStreamSeq.String(strconv.FormatUint(ack.Sequence, 10))))
	}
	if err := s.Delete(ctx, seq); err != nil && !errors.Is(err, ErrNotFound) {
		r.Err = fmt.Errorf("dlq: dead letter %d was republished as call %s but could not be removed: %w", seq, call.ID, err)
		return r, r.Err
	}
	return r, nil
}

// ParseRate reads a replay rate: calls per second ("5", "5/s"), per
// minute ("100/m"), or 0 for no limit. Negative, NaN and infinite rates
// are refused. The CLI's --rate and the console's replay take it.
func ParseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("%q: want a rate such as 5/s, 100/m or 0 (no limit)", s)
	}
	switch unit {
	case "", "s", "sec":
		return n, nil
	case "m", "min":
		return n / 60, nil
	}
	return 0, fmt.Errorf("%q: the unit must be /s or /m", s)
}
