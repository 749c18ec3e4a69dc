package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// duplicateRecheck is how often a duplicate watch looks the stored result
// up again (±25%): a backstop for a result its subscription missed (a
// reconnect), not the way results normally arrive.
const duplicateRecheck = 3 * time.Second

// watchDuplicate finds the result of a call whose publish JetStream
// reported as a duplicate: the call is, or was, in flight under another
// orchestrator instance (or this one before a restart), so its result goes,
// or went, to a result subject this dispatcher does not consume. The watch
// subscribes (core NATS) to tools.result.*.<key>, which sees the result
// when the worker publishes it, and only then looks for a stored one in
// TOOL_RESULTS, so a result published in between is seen by one or the
// other; it looks again every duplicateRecheck while the call still has
// waiters. What it finds goes to the call table like any result. One watch
// runs per key at a time; it ends when the call has no waiters left or the
// dispatcher stops.
func (d *Dispatcher) watchDuplicate(key string) {
	if _, running := d.watching.LoadOrStore(key, struct{}{}); running {
		return
	}
	if !d.tasks.Go(func() { d.runDuplicateWatch(key) }) {
		d.watching.Delete(key)
	}
}

func (d *Dispatcher) runDuplicateWatch(key string) {
	defer d.watching.Delete(key)
	subject := jetstream.ResultKeySubject(key)
	sub, err := d.nc.Subscribe(subject, func(m *nats.Msg) { d.deliverResult(m.Subject, m.Data, true) })
	if err == nil {
		defer func() { _ = sub.Unsubscribe() }()
		// The server must have the subscription before the look-up.
		err = d.nc.FlushTimeout(d.cfg.PublishTimeout)
	}
	if err != nil {
		d.log.Warn("subscribing to the result of a call published before failed; looking it up instead",
			slog.String("call_key", key), slog.Any("error", err))
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-d.ended:
			return
		case <-t.C:
		}
		if !d.calls.pending(key) {
			return
		}
		d.lookupResult(key)
		if !d.calls.pending(key) {
			return
		}
		t.Reset(duplicateRecheck*3/4 + rand.N(duplicateRecheck/2))
	}
}

// storedResult returns the last result TOOL_RESULTS holds for key, or
// nil when it holds none or the look-up failed (logged at debug with
// what, the look-up's purpose).
func (d *Dispatcher) storedResult(key, what string) *js.RawStreamMsg {
	ctx, cancel := context.WithTimeout(d.Life(), d.cfg.PublishTimeout)
	defer cancel()
	m, err := jetstream.LastResult(ctx, d.results, key)
	switch {
	case errors.Is(err, js.ErrMsgNotFound):
		return nil
	case err != nil:
		d.log.Debug(what+" failed", slog.String("call_key", key), slog.Any("error", err))
		return nil
	}
	return m
}

// lookupResult delivers the stored result of key, if TOOL_RESULTS has one.
func (d *Dispatcher) lookupResult(key string) {
	m := d.storedResult(key, "looking up the stored result of a call")
	if m == nil {
		return
	}
	if window := d.results.CachedInfo().Config.Duplicates; m.Time.Before(time.Now().Add(-window)) {
		// Stored before the call message JetStream matched was published:
		// an earlier message of the same call. Its transient error said
		// that one did not get through; the call in flight now answers.
		if res, err := envelope.DecodeResult(m.Data); err != nil || res.Class == envelope.ClassTransient {
			return
		}
	}
	d.deliverResult(m.Subject, m.Data, true)
}
