package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// sweepMaxPerTool bounds the poison calls one sweep takes from one tool;
// the rest wait for the next sweep.
const sweepMaxPerTool = 100

// poisonCandidate is a call a sweep found at or below its consumer's
// doneFloor.
type poisonCandidate struct {
	tool       string
	seq        uint64
	deliveries int       // the consumer's MaxDeliver
	created    time.Time // when the consumer was created
}

// sweepLoop sweeps at once and then every SweepInterval until sweeping
// ends (Stop begins); the handling of each poison call is under life.
func (w *PoisonWatcher) sweepLoop(sweeping, life context.Context) {
	for {
		w.sweepAndLog(sweeping, life)
		select {
		case <-sweeping.Done():
			return
		case <-time.After(w.cfg.SweepInterval):
		}
	}
}

// sweepAndLog runs one sweep. A failure is logged at warn level once per
// outage; the sweeps that fail after it at debug level.
func (w *PoisonWatcher) sweepAndLog(sweeping, life context.Context) {
	err := w.sweep(sweeping, life)
	w.sweeps.Add(1)
	if sweeping.Err() != nil {
		return // stopping, not an outage
	}
	log := w.cfg.Logger
	switch {
	case err != nil && !w.sweepFailing:
		w.sweepFailing = true
		log.Warn("sweeping "+jetstream.StreamCalls+" for poison calls failed; retrying every sweep interval, logged again only once it works",
			"err", err, "sweep_interval", w.cfg.SweepInterval)
	case err != nil:
		log.Debug("sweeping for poison calls failed again", "err", err)
	case w.sweepFailing:
		w.sweepFailing = false
		log.Info("sweeping " + jetstream.StreamCalls + " for poison calls works again")
	}
}

// sweep finds the calls in TOOL_CALLS that their consumer will never
// deliver again and sets them aside, each under life; ctx ends the search.
//
// When a call reaches MaxDeliver, nats-server (v2.15, consumer.go:
// hasMaxDeliveries when its ack wait runs out, getNextMsg when it would be
// redelivered) drops it from the consumer's pending set and, when it was
// the oldest pending call, moves the consumer's ack floor past it in
// memory (moveAckFloor). It does not remove it from the stream; only an
// ack does that (work-queue retention). Consumer info, though, reports the
// floor of the consumer's store (infoWithSnapAndReply), and the store
// drops the call from its pending set without moving its floor
// (UpdateDelivered). The store moves its floor only on acks (UpdateAcks):
// past the dropped call once every call delivered before it was acked,
// unless the dropped call was itself the oldest pending, and to the last
// call delivered whenever an ack leaves nothing pending.
// So a call still on tools.call.<tool> is one the consumer will never
// deliver again when
//
//   - its sequence is at or below the consumer's reported ack floor, or
//   - nothing is pending (in flight or waiting to be redelivered) and its
//     sequence is at or below the last one delivered.
//
// That is a poison call, or an acked call a clustered stream has not
// removed yet. To tell them apart, a candidate is set aside only if it is
// still there, and the rule still holds for the same consumer,
// SweepConfirm after it was found.
//
// A poison call the reported floor has not passed while other calls of its
// tool stay in flight is found once the tool is idle at a sweep, or once an
// ack moved the floor past it; the advisory covers it before that.
func (w *PoisonWatcher) sweep(ctx, life context.Context) error {
	consumers, err := w.toolConsumers(ctx)
	if err != nil {
		return fmt.Errorf("list the consumers of %s: %w", jetstream.StreamCalls, err)
	}
	var found []poisonCandidate
	for _, c := range consumers {
		cs, err := w.behindFloor(ctx, c)
		if err != nil {
			return err
		}
		found = append(found, cs...)
	}
	if len(found) == 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(w.cfg.SweepConfirm):
	}
	var errs []error
	// disconnected tells whether to give up on the rest, which would only
	// wait out their timeouts too.
	disconnected := func() bool { return w.cfg.JetStream.Conn().Status() != nats.CONNECTED }
	floors := map[string]*js.ConsumerInfo{}
	for _, c := range found {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		info, seen := floors[c.tool]
		if !seen {
			if info, err = w.consumerInfo(ctx, c.tool); err != nil {
				if errs = append(errs, err); disconnected() {
					break
				}
			}
			floors[c.tool] = info // nil when gone or unreadable: skip its calls
		}
		if info == nil || !info.Created.Equal(c.created) || c.seq > doneFloor(info) {
			continue // its consumer is gone, made again, or not done with it: not poison
		}
		hctx, cancel := context.WithTimeout(life, w.cfg.Timeout)
		pc, err := w.handleOnce(hctx, c.tool, c.seq, c.deliveries, time.Now())
		cancel()
		switch {
		case err != nil:
			if errs = append(errs, fmt.Errorf("set aside the poison call %d of %s: %w", c.seq, c.tool, err)); disconnected() {
				return errors.Join(errs...)
			}
		case pc != nil:
			pc.Swept = true
			w.handled(w.cfg.Logger.With("tool", c.tool, "stream_seq", c.seq, "deliveries", c.deliveries), *pc)
		}
	}
	return errors.Join(errs...)
}

// toolConsumers lists the tools' consumers on TOOL_CALLS that can hold a
// poison call: durable, named tool_<tool>, filtered on tools.call.<tool>,
// delivering every call and acked explicitly, with a MaxDeliver and a
// doneFloor.
func (w *PoisonWatcher) toolConsumers(ctx context.Context) ([]*js.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	l := w.calls.ListConsumers(ctx)
	var out []*js.ConsumerInfo
	for info := range l.Info() { // drained to the end: the lister stops only then
		tool, ok := strings.CutPrefix(info.Name, jetstream.ConsumerPrefix)
		if ok && info.Config.Durable != "" && info.Config.FilterSubject == jetstream.CallSubject(tool) &&
			info.Config.DeliverPolicy == js.DeliverAllPolicy && info.Config.AckPolicy == js.AckExplicitPolicy &&
			info.Config.MaxDeliver > 0 && doneFloor(info) > 0 {
			out = append(out, info)
		}
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// doneFloor is the highest stream sequence at or below which the consumer
// will never deliver a call again (see sweep): its ack floor, or the last
// sequence delivered when no call is pending.
func doneFloor(info *js.ConsumerInfo) uint64 {
	if info.NumAckPending == 0 {
		return max(info.AckFloor.Stream, info.Delivered.Stream)
	}
	return info.AckFloor.Stream
}

// behindFloor reads the calls on the consumer's tool subject from the start
// of the stream up to its doneFloor: those it will never deliver again.
// Usually there are none, and it takes one request to see that.
func (w *PoisonWatcher) behindFloor(ctx context.Context, c *js.ConsumerInfo) ([]poisonCandidate, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	tool := strings.TrimPrefix(c.Name, jetstream.ConsumerPrefix)
	subject, floor := jetstream.CallSubject(tool), doneFloor(c)
	var out []poisonCandidate
	// The server reads from the stream's first sequence when next is below it.
	for next := uint64(1); len(out) < sweepMaxPerTool; {
		m, err := jetstream.GetMsgFromLeader(ctx, w.cfg.JetStream, jetstream.StreamCalls, next, subject)
		if errors.Is(err, js.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the calls of %s: %w", tool, err)
		}
		if m.Sequence > floor {
			break
		}
		out = append(out, poisonCandidate{tool: tool, seq: m.Sequence, deliveries: c.Config.MaxDeliver, created: c.Created})
		next = m.Sequence + 1
	}
	return out, nil
}

// consumerInfo reads the info of tool's consumer; nil and no error when it
// is gone.
func (w *PoisonWatcher) consumerInfo(ctx context.Context, tool string) (*js.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	c, err := w.calls.Consumer(ctx, jetstream.ConsumerName(tool))
	if errors.Is(err, js.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the consumer of %s: %w", tool, err)
	}
	return c.CachedInfo(), nil
}
