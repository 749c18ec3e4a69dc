package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// Re-publishing of calls JetStream did not acknowledge (the pauses are
// jetstream.RepublishDelay).
const (
	// publishPoll is how often a turn waiting for one PubAck looks at the
	// turn's other publishes: re-publishes due, attempts that failed or
	// timed out, a permissions violation. It only matters once a PubAck
	// takes that long; on the fast path every PubAck is in before.
	publishPoll = 50 * time.Millisecond
)

var errPublishDeadline = errors.New("not stored before the call's deadline")

// pubWait is one call of a turn from its first publish to its PubAck.
type pubWait struct {
	idx int
	msg *nats.Msg       // published again as is: same subject, data, headers, Msg-Id
	cm  *callMsg        // msg's, for reuse once acknowledged
	paf js.PubAckFuture // the attempt in flight; nil while waiting to publish again
	// polled says poll has looked at paf's error channel: awaitHead
	// watches it from then on. Until then a failure is found by the next
	// poll (publishPoll): nats.go makes the channel on demand, and on the
	// fast path, where the PubAck comes first, it is not needed.
	polled   bool
	due      time.Duration // in flight: when the attempt times out; else when to publish again
	wait     time.Duration // the attempt's PubAck wait
	attempts int
	err      error // the previous attempt's failure
	done     bool  // acknowledged, and its publish slot released
	reposts  int   // publishes under a new Msg-Id after a cancelled original (repostCancelled)
}

// publisher stores the waiting calls of one turn in TOOL_CALLS. It runs on
// the turn's goroutine: a turn whose publishes succeed starts no goroutine
// and allocates nothing per call beyond the message.
//
// Its times are durations since start, not time.Time values: those hold a
// pointer, and storing one in the publisher would make escape analysis move
// the publisher's queue to the heap.
type publisher struct {
	t      *turn
	start  time.Time     // publishing began
	until  time.Duration // no publish starts after this; a slot is awaited until then
	retry  bool          // PublishRetryFor is positive
	sendAt time.Duration // start of the first attempts being published
	queue  []pubWait     // in publish order; a publish slot for each not done
	head   int           // queue[:head] are done

	armed    time.Duration // when t.timer fires; -1 once it has fired
	nextPoll time.Duration

	denied      error // the connection's last error when publishing began
	republished int   // publishes after the first ones
	warned      bool
}

// publish stores the waiting calls in TOOL_CALLS, at most MaxPublishInFlight
// unacknowledged at a time across the dispatcher, and waits for the
// PubAcks. A call whose PubAck fails or times out is published again, with
// the same Nats-Msg-Id (the call key) so that TOOL_CALLS stores it once, after a jittered
// exponential backoff while the turn's retry budget lasts (see
// Config.PublishRetryFor); an error that another publish cannot cure fails
// the turn at once. It publishes the calls not published yet and not held
// by the scheduler: once after schedule, and again for the calls granted
// later (fair.go).
func (t *turn) publish() error {
	n := 0
	for i := range t.slots {
		if sl := &t.slots[i]; sl.state == slotWaiting && !sl.held && !sl.published {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	d := t.d
	p := publisher{
		t: t, start: time.Now(), until: d.cfg.PublishTimeout,
		armed: publishPoll, nextPoll: publishPoll,
		denied: d.nc.LastError(),
	}
	var one [1]pubWait // a turn of one call, the most common, allocates no queue
	if n == 1 {
		p.queue = one[:0]
	} else {
		p.queue = make([]pubWait, 0, n)
	}
	if d.cfg.PublishRetryFor > 0 {
		p.retry = true
		p.until = max(d.cfg.PublishTimeout, d.cfg.PublishRetryFor)
	}
	t.timer = getTimer(publishPoll) // in the turn: in p, it would move p's queue to the heap
	defer func() { putTimer(t.timer); t.timer = nil }()
	defer p.releaseSlots() // error paths
	for i := range t.calls {
		if sl := &t.slots[i]; sl.state != slotWaiting || sl.held || sl.published {
			continue
		}
		t.slots[i].published = true
		if err := p.acquire(i); err != nil {
			return err
		}
		sl := &t.slots[i]
		msg := sl.msg.address(t.calls[i].Name, callMsgID(sl.key, sl.epoch), t.callTraceparent(i), t.progress != nil)
		p.queue = append(p.queue, pubWait{idx: i, msg: msg, cm: sl.msg})
		sl.msg = nil // the publisher's until its PubAck
		if err := p.send(&p.queue[len(p.queue)-1], p.sendAt); err != nil {
			return err
		}
	}
	for p.head < len(p.queue) {
		if err := p.awaitHead(); err != nil {
			return err
		}
	}
	if p.republished > 0 {
		d.log.Info("calls stored after publishing them again", slog.Int("calls", len(p.queue)),
			slog.Int("republished", p.republished), slog.Duration("elapsed", time.Since(p.start)),
			slog.String("session", t.session), slog.String("traceparent", t.traceparent))
	}
	return nil
}

// acquire takes a publish slot for call i. While none is free and this turn
// has publishes outstanding, it makes room by awaiting the oldest, so that a
// turn larger than MaxPublishInFlight cannot block itself. When it had to
// wait, the calls published next get their own PubAck wait from then.
func (p *publisher) acquire(i int) error {
	t, d := p.t, p.t.d
	select {
	case d.inflight <- struct{}{}:
		return nil
	default:
	}
	for p.head < len(p.queue) {
		if err := p.awaitHead(); err != nil {
			return err
		}
		select {
		case d.inflight <- struct{}{}:
			p.sendAt = p.now()
			return nil
		default:
		}
	}
	p.arm(p.until)
	select {
	case d.inflight <- struct{}{}:
		p.sendAt = p.now()
		return nil
	case <-t.timer.C:
		p.armed = -1
		return t.publishErr(i, fmt.Errorf("no publish slot within %v", p.until))
	case <-t.ctx.Done():
		return p.ctxErr(i)
	case <-t.expiryC():
		return t.publishErr(i, errPublishDeadline)
	case <-d.ended:
		return fmt.Errorf("dispatch: %w", d.stoppedErr())
	}
}

// send publishes e, attempt e.attempts+1, at now.
func (p *publisher) send(e *pubWait, now time.Duration) error {
	e.attempts++
	if e.attempts > 1 {
		p.republished++
	}
	e.wait = min(p.t.d.cfg.PublishTimeout, p.until-now)
	e.due = now + e.wait
	paf, err := p.t.d.publishAsync(e.msg)
	if err != nil {
		return p.failed(e, err)
	}
	e.paf, e.polled = paf, false
	return nil
}

// publishAsync publishes m and returns the future of its PubAck: through
// the dispatcher's pubAcks, or js's PublishMsgAsync without a connection
// (a JetStream that is not nats.go's).
func (d *Dispatcher) publishAsync(m *nats.Msg) (js.PubAckFuture, error) {
	if d.acks != nil {
		return d.acks.publish(m)
	}
	return d.js.PublishMsgAsync(m)
}

// awaitHead waits until the oldest call not yet acknowledged is, publishing
// it and the turn's other calls again as needed meanwhile.
func (p *publisher) awaitHead() error {
	t, d := p.t, p.t.d
	e := &p.queue[p.head]
	for !e.done {
		var okC <-chan *js.PubAck
		var errC <-chan error
		if e.paf != nil {
			okC = e.paf.Ok()
			if e.polled {
				errC = e.paf.Err()
			}
		}
		p.arm(min(e.due, p.nextPoll))
		select {
		case ack := <-okC:
			p.acked(e, ack)
		case err := <-errC:
			if err := p.failed(e, err); err != nil {
				return err
			}
		case <-t.timer.C:
			p.armed = -1
			if err := p.poll(p.now()); err != nil {
				return err
			}
		case <-t.ctx.Done():
			return p.ctxErr(e.idx)
		case <-t.expiryC():
			return t.publishErr(e.idx, errPublishDeadline)
		case <-d.ended:
			return fmt.Errorf("dispatch: %w", d.stoppedErr())
		}
	}
	p.head++
	return nil
}

// poll settles what is due among the turn's outstanding publishes: PubAcks
// and failures already in, attempts that timed out, re-publishes whose
// backoff is over, a publish the server refused for lack of permission.
func (p *publisher) poll(now time.Duration) error {
	p.nextPoll = now + publishPoll
	denied := p.deniedSince()
	for k := p.head; k < len(p.queue); k++ {
		e := &p.queue[k]
		if e.done {
			continue
		}
		if e.paf == nil {
			if now >= e.due {
				if err := p.send(e, now); err != nil {
					return err
				}
			}
			continue
		}
		e.polled = true
		select {
		case ack := <-e.paf.Ok():
			p.acked(e, ack)
			continue
		case err := <-e.paf.Err():
			if err := p.failed(e, err); err != nil {
				return err
			}
			continue
		default:
		}
		if denied != nil && publishDenied(denied, e.msg.Subject) {
			return p.t.publishErr(e.idx, denied)
		}
		if now >= e.due {
			if err := p.failed(e, &ackTimeoutError{wait: e.wait}); err != nil {
				return err
			}
		}
	}
	return nil
}

// acked settles e: its call is stored.
func (p *publisher) acked(e *pubWait, ack *js.PubAck) {
	t, d := p.t, p.t.d
	if ack.Duplicate && e.attempts == 1 && p.repostCancelled(e, ack.Sequence) {
		return // published again under a new Msg-Id: not done yet
	}
	c := t.calls[e.idx]
	if e.attempts == 1 && e.reposts == 0 && e.cm != nil {
		putCallMsg(e.cm) // published once and acknowledged: nats.go is done with it
	}
	e.done, e.paf, e.msg, e.cm = true, nil, nil, nil
	<-d.inflight
	d.metrics.CallDispatched(c.Name)
	if ours(ack, e.attempts) {
		t.slots[e.idx].seq = ack.Sequence // a cancellation cancels this message
	}
	if t.tr != nil {
		t.tracePublished(e.idx, ack.Sequence, !ours(ack, e.attempts))
	}
	if ack.Duplicate {
		// Published before: by this turn's lost first attempt, or by
		// another orchestrator, or by this one before a restart, whose
		// result subject this one does not consume.
		if e.attempts == 1 {
			d.log.Debug("call already queued or run; looking for its result",
				slog.String("call_id", c.ID), slog.String("tool", c.Name), slog.String("session", t.session))
		}
		d.watchDuplicate(t.slots[e.idx].key)
	}
}

// maxCancelledReposts bounds repostCancelled's chain for one call: each
// link is a message of the same call that another orchestrator's caller
// cancelled within the duplicate window.
const maxCancelledReposts = 8

// repostCancelled publishes e again, under the Msg-Id <key>.r<seq>, when
// the message JetStream took it for a duplicate of (sequence seq) was
// cancelled: it is gone from TOOL_CALLS (a work queue: acked or deleted)
// and no result of the call is stored (a worker stores the result before
// it acks; a cancelled call has none). That happens when a caller cancels
// a call on one orchestrator and sends it again through another within
// the duplicate window: the other orchestrator does not know the first
// one's count of cancellations (callMsgID), and without this the call
// would wait for a result that never comes. The new Msg-Id depends only
// on the cancelled message, so two orchestrators that post the same call
// again share one message. Anything it cannot tell (a failed look-up)
// leaves e a duplicate, as before.
func (p *publisher) repostCancelled(e *pubWait, seq uint64) bool {
	t, d := p.t, p.t.d
	key := t.slots[e.idx].key
	if e.reposts >= maxCancelledReposts || e.msg == nil || d.calls.shared(key) {
		return false // another turn of this dispatcher waits for the same call: its publish is the original
	}
	ctx, cancel := context.WithTimeout(t.ctx, d.cfg.PublishTimeout)
	defer cancel()
	calls, err := d.callsStream(ctx)
	if err != nil {
		return false
	}
	if _, err := calls.GetMsg(ctx, seq); !errors.Is(err, js.ErrMsgNotFound) {
		return false // still queued or running (or unknown): its result will come
	}
	if _, err := jetstream.LastResult(ctx, d.results, key); !errors.Is(err, js.ErrMsgNotFound) {
		return false // answered: the duplicate watch delivers the stored result
	}
	e.reposts++
	e.msg.Header.Set(js.MsgIDHeader, key+".r"+strconv.FormatUint(seq, 10))
	e.paf, e.attempts, e.due = nil, 0, p.now() // the next poll publishes it (keeping its publish slot)
	d.log.Debug("call cancelled before through another orchestrator; publishing it again",
		slog.String("call_id", t.calls[e.idx].ID), slog.String("tool", t.calls[e.idx].Name), slog.Uint64("cancelled_seq", seq))
	return true
}

// failed handles the failure err of e's last attempt: it schedules the next
// attempt, or returns the turn's error when err is final, retries are
// disabled or the next attempt would start past the budget or the deadline.
func (p *publisher) failed(e *pubWait, err error) error {
	t := p.t
	e.paf = nil
	if !p.retry || !jetstream.Transient(err) {
		return t.publishErr(e.idx, err)
	}
	now := p.now()
	next := now + jetstream.RepublishDelay(e.attempts)
	if next >= p.until || !p.start.Add(next).Before(t.deadline) {
		// A last attempt the budget cut short says less about the outage
		// than the one before it.
		var timeout *ackTimeoutError
		if errors.As(err, &timeout) && timeout.wait < t.d.cfg.PublishTimeout && e.err != nil {
			err = e.err
		}
		if e.attempts > 1 {
			err = fmt.Errorf("%w (%d attempts in %v)", err, e.attempts, now.Round(time.Millisecond))
		}
		return t.publishErr(e.idx, err)
	}
	e.due, e.err = next, err
	if !p.warned {
		p.warned = true
		c := t.calls[e.idx]
		t.d.log.Warn("JetStream did not store a call; publishing the turn's unstored calls again",
			slog.String("call_id", c.ID), slog.String("tool", c.Name), slog.String("session", t.session),
			slog.String("traceparent", t.traceparent), slog.Any("error", err),
			slog.Duration("retry_for", p.until))
	}
	return nil
}

// ackTimeoutError is the failure of an attempt whose PubAck did not come
// within its wait.
type ackTimeoutError struct{ wait time.Duration }

func (e *ackTimeoutError) Error() string {
	return fmt.Sprintf("no acknowledgement within %v", e.wait.Round(time.Millisecond))
}

// deniedSince returns the connection's last error if it is a permissions
// violation that came after the turn began publishing.
func (p *publisher) deniedSince() error {
	err := p.t.d.nc.LastError()
	// nats.go makes each violation a new fmt.Errorf value, a pointer: the
	// comparison cannot panic, and a new violation is never equal to the
	// one seen before.
	if !errors.Is(err, nats.ErrPermissionViolation) || err == p.denied {
		return nil
	}
	return err
}

// now is the time since publishing began.
func (p *publisher) now() time.Duration { return time.Since(p.start) }

// arm makes the turn's timer fire at at.
func (p *publisher) arm(at time.Duration) {
	if at == p.armed {
		return
	}
	p.t.timer.Reset(at - p.now())
	p.armed = at
}

// releaseSlots gives back the publish slots still held (error paths).
func (p *publisher) releaseSlots() {
	for k := p.head; k < len(p.queue); k++ {
		if !p.queue[k].done {
			<-p.t.d.inflight
		}
	}
}

// publishDenied reports whether err, the connection's last error, is the
// server's refusal of a publish to subject. The server does not answer such
// a publish (its PubAck would only time out): it sends
// -ERR 'Permissions Violation for Publish to "<subject>"' on the connection,
// which nats.go keeps as the connection's last error wrapping
// nats.ErrPermissionViolation. No code identifies the subject, so it is read
// from that text, as nats.go itself does for subscriptions.
func publishDenied(err error, subject string) bool {
	return errors.Is(err, nats.ErrPermissionViolation) &&
		strings.HasSuffix(err.Error(), "Publish to "+strconv.Quote(subject))
}

// ctxErr is the error of a publish ended by ctx: a cancellation is the
// caller's (the calls published or in flight are then cancelled: the
// latter's PubAcks are kept for it), a deadline means the pool did not
// store the call in time.
func (p *publisher) ctxErr(i int) error {
	t := p.t
	if errors.Is(t.ctx.Err(), context.DeadlineExceeded) {
		return t.publishErr(i, errPublishDeadline)
	}
	if t.detached() { // detach.go: the calls stay in the pool
		return t.ctxCancelled()
	}
	t.cancelled = true
	for k := p.head; k < len(p.queue); k++ {
		if e := &p.queue[k]; !e.done && e.paf != nil {
			t.unacked = append(t.unacked, unackedCall{idx: e.idx, paf: e.paf, attempts: e.attempts})
		}
	}
	return fmt.Errorf("dispatch: %w", t.ctx.Err())
}

// progressAsked is the value of jetstream.HeaderProgress.
var progressAsked = []string{"1"}

// callMsgID is the Nats-Msg-Id of a call with key key cancelled epoch times
// before: the key itself for a call never cancelled (nearly all), else the
// key and the epoch, so that JetStream stores the call anew rather than
// drop it as a duplicate of the message the cancellation removed.
func callMsgID(key string, epoch uint32) string {
	if epoch == 0 {
		return key
	}
	return key + "." + strconv.FormatUint(uint64(epoch), 10)
}

// ours reports whether a PubAck is of a message the turn stored itself
// (not a duplicate of one another caller stored first, which a
// cancellation must not touch): a first attempt that is not a duplicate,
// or a later one (a duplicate then is most likely the turn's own attempt
// whose PubAck was lost).
func ours(ack *js.PubAck, attempts int) bool { return !ack.Duplicate || attempts > 1 }

func (t *turn) publishErr(i int, err error) error {
	c := t.calls[i]
	t.d.log.Warn("publishing a call failed", slog.String("call_id", c.ID), slog.String("tool", c.Name),
		slog.String("session", t.session), slog.String("traceparent", t.traceparent), slog.Any("error", err))
	return fmt.Errorf("dispatch: publish call %s to %s: %w: %w", c.ID, jetstream.CallSubject(c.Name), ErrUnavailable, err)
}
