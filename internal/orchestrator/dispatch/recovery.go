package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// Stored results before a publish. A call's Nats-Msg-Id makes JetStream
// drop a second message of the same call within the duplicate window, and
// the dispatcher then answers it from the first one's result
// (watchDuplicate). Two things make the server forget a call that ran:
//
//   - A restarted NATS server rebuilds its duplicate window from the
//     messages still stored, and a call that finished has left TOOL_CALLS
//     (a work queue). `orchestrator serve` restarts its embedded server with
//     itself, so a turn posted again after a restart of serve ran its calls
//     a second time (issue 23).
//   - A call held by the scheduler longer than the duplicate window may
//     meanwhile have run under another replica (its caller posted it there
//     too, e.g. after losing its connection), and the window has forgotten
//     that message by the time this one is published.
//
// In both cases the dispatcher looks each call up in TOOL_RESULTS before
// it publishes it, and answers a call that has a stored result (not a
// transient error: that one is retried) with it instead of running it
// again. After a (re)connection it does so while the server may have
// forgotten a call that ran: until the last result stored before the
// connection plus the duplicate window (recovery). A turn of a server
// that did not restart, or after the window, pays one atomic load.

// lookUpsAtOnce bounds the look-ups of one turn in flight at once.
const lookUpsAtOnce = 16

// recovery is the look-up window after a (re)connection.
type recovery struct {
	// until is the end of the window, in unix nanoseconds; 0 when closed.
	until atomic.Int64
}

// recovering reports whether calls published at now are looked up first.
func (r *recovery) recovering(now time.Time) bool {
	u := r.until.Load()
	return u != 0 && now.UnixNano() < u
}

// closed reports, without reading the clock, that the window is closed.
func (r *recovery) closed() bool { return r.until.Load() == 0 }

// openRecovery sets the look-up window from info, TOOL_RESULTS as the
// server sees it now: open while a result stored before may still have
// been in the duplicate window of its call. The server's own timestamps
// measure that, so a skewed local clock does not matter.
func (d *Dispatcher) openRecovery(info *js.StreamInfo, now time.Time) {
	if info == nil || info.State.Msgs == 0 || info.State.LastTime.IsZero() {
		d.recovery.until.Store(0)
		return
	}
	serverNow := info.TimeStamp
	if serverNow.IsZero() { // an older server: this clock will do
		serverNow = now
	}
	left := info.Config.Duplicates - serverNow.Sub(info.State.LastTime)
	if left <= 0 {
		d.recovery.until.Store(0)
		return
	}
	until := now.Add(left)
	d.recovery.until.Store(until.UnixNano())
	d.log.Info("looking up stored results before publishing calls, in case the NATS server forgot calls that ran (a restart)",
		slog.Duration("for", left.Round(time.Second)))
}

// watchReconnects opens the look-up window at every reconnection of the
// dispatcher's connection (the server may have restarted): at once for a
// whole duplicate window, then as TOOL_RESULTS says. It returns when the
// dispatcher's life ends.
func (d *Dispatcher) watchReconnects(life context.Context) {
	ch := d.nc.StatusChanged(nats.CONNECTED)
	defer d.nc.RemoveStatusListener(ch)
	for {
		select {
		case <-life.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
		}
		now := time.Now()
		window := d.results.CachedInfo().Config.Duplicates
		d.recovery.until.Store(now.Add(window).UnixNano())
		ctx, cancel := context.WithTimeout(life, d.cfg.PublishTimeout)
		info, err := d.results.Info(ctx)
		cancel()
		if err != nil {
			d.log.Debug("reading TOOL_RESULTS after a reconnection failed; looking up stored results for a whole duplicate window",
				slog.Any("error", err))
			continue
		}
		d.openRecovery(info, now)
	}
}

// lookUpStored answers from TOOL_RESULTS the calls of the turn about to be
// published that have a stored result, when the server may have forgotten
// them: in the recovery window, or, from a grant (granted is true), for a
// turn that waited for most of a duplicate window. The answers reach the
// turn through the call table, like any result, and so do the other
// waiters of the same calls. A look-up that fails leaves its call to be
// published.
func (t *turn) lookUpStored(granted bool) {
	d := t.d
	if !granted && d.recovery.closed() || d.results == nil {
		return // the hot path: one atomic load
	}
	now := time.Now()
	late := granted && now.Sub(t.now) >= d.results.CachedInfo().Config.Duplicates*3/4
	if !late && !d.recovery.recovering(now) {
		return
	}
	var keys []string
	for i := range t.slots {
		if sl := &t.slots[i]; sl.state == slotWaiting && !sl.held && !sl.published {
			keys = append(keys, sl.key)
		}
	}
	if len(keys) == 0 {
		return
	}
	if len(keys) == 1 {
		d.deliverStored(keys[0])
	} else {
		var wg sync.WaitGroup
		next := make(chan string)
		for range min(len(keys), lookUpsAtOnce) {
			wg.Go(func() {
				for key := range next {
					d.deliverStored(key)
				}
			})
		}
		for _, key := range keys {
			next <- key
		}
		close(next)
		wg.Wait()
	}
	t.takeDelivered()
}

// deliverStored delivers the stored result of key to its waiters, unless
// there is none or it is a transient error (the call is then run again,
// as a retry).
func (d *Dispatcher) deliverStored(key string) {
	m := d.storedResult(key, "looking up the stored result of a call before publishing it (it is published)")
	if m == nil {
		return
	}
	if res, err := envelope.DecodeResult(m.Data); err != nil || res.Class == envelope.ClassTransient {
		return
	}
	d.log.Debug("call answered from its stored result; not published again", slog.String("call_key", key))
	d.deliverResult(m.Subject, m.Data, true)
}
