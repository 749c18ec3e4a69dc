package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/pkg/envelope"
)

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
	// key is the call key; "" for a call answered without publishing.
	key string
	// msg is the call's message until it is handed to the publisher.
	msg *callMsg
}

// turn is one Dispatch call in progress.
type turn struct {
	d       *Dispatcher
	ctx     context.Context
	tenant  string
	session string
	calls   []envelope.ToolUseBlock
	results []envelope.Result
	slots   []slot
	ch      chan delivery // results from the consumer; room for every call
	// oneResult and oneSlot are results and slots of a turn of one call,
	// the most common: the turn is then one allocation and its channel.
	oneResult [1]envelope.Result
	oneSlot   [1]slot

	now      time.Time
	deadline time.Time
	expiry   *time.Timer // the deadline, when ctx has none
	timer    *time.Timer // publish: PubAck timeouts, re-publishes, polls
	waiting  int         // slots registered in the table and not answered

	// traceparent is the W3C trace context of the turn's calls, in their
	// envelopes and in their messages' traceparent header; with tracing on
	// (tr), each call carries its own span's instead.
	traceparent string
	// tr is the calls' spans with Config.Tracer on; nil when it is off.
	tr *turnTrace

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
	// adm is what admission control counts of the turn (admission.go).
	adm admitted
}

func (d *Dispatcher) newTurn(ctx context.Context, session string, calls []envelope.ToolUseBlock) *turn {
	t := &turn{
		d:        d,
		ctx:      ctx,
		tenant:   TenantFrom(ctx),
		session:  session,
		calls:    calls,
		ch:       make(chan delivery, chanRoom(d, len(calls))),
		now:      time.Now(),
		progress: ProgressFrom(ctx),
	}
	if len(calls) == 1 {
		t.results, t.slots = t.oneResult[:], t.oneSlot[:]
	} else {
		t.results, t.slots = make([]envelope.Result, len(calls)), make([]slot, len(calls))
	}
	if dl, ok := ctx.Deadline(); ok {
		t.deadline = dl
	} else {
		t.deadline = t.now.Add(d.cfg.DefaultTimeout)
		t.expiry = getTimer(d.cfg.DefaultTimeout)
	}
	return t
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
				t.cancelled = !t.detached() // release cancels the calls left: detach.go
				return t.ctxCancelled()
			}
			t.expire()
		case <-t.expiryC():
			t.expire()
		case <-d.ended:
			return fmt.Errorf("dispatch: %w", d.stoppedErr())
		}
	}
	return nil
}

func (t *turn) answer(dl delivery) {
	if t.slots[dl.idx].state == slotAnswered {
		return
	}
	t.results[dl.idx] = *dl.res // the turn owns it: see delivery
	t.slots[dl.idx].state = slotAnswered
	if t.tr != nil {
		t.traceAnswered(dl.idx)
	}
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
			t.d.calls.leave(t.slots[i].key, waiter{ch: t.ch, idx: i, t: t}, now)
		}
	}
}

// release stops the timer and, on the error paths, takes the calls still
// waiting out of the call table.
func (t *turn) release() {
	if t.expiry != nil {
		putTimer(t.expiry)
		t.expiry = nil
	}
	for i := range t.slots {
		if sl := &t.slots[i]; sl.msg != nil { // never handed to the publisher
			putCallMsg(sl.msg)
			sl.msg = nil
		}
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

// timers are stopped timers for turns to reuse: the deadline of a turn
// whose ctx has none, and the publisher's. A timer stopped (Go 1.23 on)
// delivers no stale time after a Reset.
var timers sync.Pool

// getTimer returns a timer that fires after d.
func getTimer(d time.Duration) *time.Timer {
	if tm, ok := timers.Get().(*time.Timer); ok {
		tm.Reset(d)
		return tm
	}
	return time.NewTimer(d)
}

// putTimer stops tm and keeps it for getTimer; the caller uses it no more.
func putTimer(tm *time.Timer) {
	tm.Stop()
	timers.Put(tm)
}
