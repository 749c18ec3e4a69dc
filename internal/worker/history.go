package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// History records the failed attempts of calls so that a dead letter
// carries every attempt, whichever worker ran it, and the start of each
// attempt of a tool that is not idempotent, so that no attempt starts after
// one that may have run. Calls are named by their call key. *settle.History
// implements it. Implementations must be safe for concurrent use.
type History interface {
	// Record appends a to the attempts of the call and returns them all,
	// oldest first. It clears the start marker of attempt a.N.
	Record(ctx context.Context, key string, a settle.Attempt) ([]settle.Attempt, error)
	// Load returns the attempts recorded for the call, oldest first.
	Load(ctx context.Context, key string) ([]settle.Attempt, error)
	// Begin marks attempt s as started, unless another attempt started
	// and never reported: then it marks nothing and returns that one.
	Begin(ctx context.Context, key string, s settle.Started, until time.Time) (*settle.Started, error)
	// StartedOf returns the marker of an attempt that started and never
	// reported, or nil.
	StartedOf(ctx context.Context, key string) (*settle.Started, error)
}

// HistoryTimeoutDefault bounds each history read or write: the history is
// best effort and must not hold up a call.
const HistoryTimeoutDefault = 2 * time.Second

// attemptOf is the record of a failed attempt.
func (w *Worker) attemptOf(j *job, d classify.Decision, start time.Time, ev Event) settle.Attempt {
	return settle.Attempt{
		N: j.attempt, WorkerID: w.cfg.WorkerID, Class: d.Class, Code: d.Code,
		Message: d.Cause, Started: start, Duration: ev.ExecTime,
	}
}

// recordAttempt appends a failed attempt to the call's history and returns
// the history, or just this attempt when there is no history or it failed
// (logged, and counted in ev.HistoryFailed). It never fails the call.
func (w *Worker) recordAttempt(call *envelope.Call, a settle.Attempt, ev *Event, log *slog.Logger) []settle.Attempt {
	if w.cfg.History == nil {
		return []settle.Attempt{a}
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.HistoryTimeout)
	defer cancel()
	all, err := w.cfg.History.Record(ctx, call.Key, a)
	if err != nil {
		ev.HistoryFailed = true
		log.Warn("recording the failed attempt failed; the dead letter may miss it", "err", err)
		return []settle.Attempt{a}
	}
	return all
}

// loadAttempts reads the call's history; nil when there is none or it
// cannot be read (logged, and counted in ev.HistoryFailed).
func (w *Worker) loadAttempts(call *envelope.Call, ev *Event, log *slog.Logger) []settle.Attempt {
	if w.cfg.History == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.HistoryTimeout)
	defer cancel()
	all, err := w.cfg.History.Load(ctx, call.Key)
	if err != nil {
		ev.HistoryFailed = true
		log.Warn("reading the call's attempts failed; the dead letter goes without them", "err", err)
		return nil
	}
	return all
}

// pauseOnRateLimit pauses the tool's consumer on the server, for every
// worker of the fleet, when the tool's downstream answered 429 with a
// Retry-After above the tool's PauseOn429Above. The pause lasts the
// Retry-After, capped at the tool's max retry delay, and is never
// shortened: a pause already in force until later is left alone. It runs
// only on such a 429, so it asks the server each time. Failures are
// logged; the call is NAKed with its delay either way.
func (w *Worker) pauseOnRateLimit(rt *tools.Registered, d classify.Decision, log *slog.Logger) {
	limit := rt.PauseOn429Above
	if limit <= 0 || d.Code != classify.CodeHTTP429 || d.RetryAfter <= limit {
		return
	}
	pause := min(d.RetryAfter, rt.Retry.WithDefaults().MaxDelay)
	until := time.Now().Add(pause)
	name := jetstream.ConsumerName(rt.Name)

	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.PublishTimeout)
	defer cancel()
	if cons, err := w.js.Consumer(ctx, jetstream.StreamCalls, name); err == nil {
		if pu := cons.CachedInfo().Config.PauseUntil; pu != nil && !until.After(*pu) {
			return // another worker paused it until later
		}
	}
	if _, err := w.js.PauseConsumer(ctx, jetstream.StreamCalls, name, until); err != nil {
		log.Warn("pausing the tool after a rate limit failed", "err", err)
		return
	}
	log.Warn("downstream rate limited the tool; paused it for every worker",
		"retry_after", d.RetryAfter, "paused_for", pause, "until", until.UTC().Format(time.RFC3339))
}
