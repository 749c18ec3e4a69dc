package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// resultFeed is where the dispatcher's results come from: the current
// result consumer and what its watchdog (Dispatcher.watch) knows of it.
type resultFeed struct {
	sub        atomic.Pointer[resultSub] // the result consumer; nil after a failed replacement
	subs       atomic.Int64              // result consumers made: numbers their names
	lastSeq    atomic.Uint64             // stream sequence of the last result handled
	lastResult atomic.Int64              // unix nanoseconds of the last result handled
	quietSince time.Time                 // the watchdog's: start or last replacement
	restarts   atomic.Int64              // result consumers made again by the watchdog
	kicked     chan string               // asks the watchdog to replace the consumer now
}

// resultSub is the dispatcher's result consumer: the dispatcher makes a
// new one, starting after the last result it handled, whenever the old one
// lost results or stopped delivering.
type resultSub struct {
	*ResultConsumer // set once made; OnError reads it only once s is current
	// lastCons is the consumer sequence of the last message delivered: a
	// jump means messages were lost on the way (a disconnect), and the
	// server's count of delivered messages beyond it means the same.
	lastCons atomic.Uint64
	// broken is set at such a jump: from then on this consumer's results
	// no longer move the sequence a new consumer starts from.
	broken atomic.Bool
}

// subscribeResults makes a result consumer that starts at stream sequence
// from and starts pulling from it.
func (d *Dispatcher) subscribeResults(ctx context.Context, from uint64) (*resultSub, error) {
	n := d.feed.subs.Add(1)
	s := &resultSub{}
	rc, err := ConsumeResults(ctx, d.js, ResultConsumerConfig{
		Name: fmt.Sprintf("results_%s_%d", d.cfg.Instance, n), Instance: d.cfg.Instance, From: from, Handler: d.resultHandler(s), Logger: d.log,
		OnError: func(err error) {
			if d.current() != s {
				return
			}
			// No responders: nothing serves the consumer (its node died).
			if errors.Is(err, js.ErrConsumerDeleted) || errors.Is(err, js.ErrConsumerNotFound) ||
				errors.Is(err, js.ErrNoHeartbeat) || errors.Is(err, nats.ErrNoResponders) {
				d.kick("the result consumer is gone or unreachable: " + err.Error())
				return
			}
			d.log.Warn("result consumer", slog.String("consumer", s.Name()), slog.Any("error", err))
		},
	})
	if err != nil {
		return nil, err
	}
	s.ResultConsumer = rc
	return s, nil
}

// resultHandler hands s's messages to handleResult, keeping the stream
// sequence to start a new consumer from and watching for lost messages.
func (d *Dispatcher) resultHandler(s *resultSub) js.MessageHandler {
	return func(msg js.Msg) {
		if sseq, cseq, ok := ackSequences(msg.Reply()); ok {
			if prev := s.lastCons.Swap(cseq); cseq > prev+1 {
				// The lost results come before this one: the next consumer
				// must start after the last result before the gap.
				s.broken.Store(true)
				if d.current() == s {
					d.kick(fmt.Sprintf("%d results were lost on the way", cseq-prev-1))
				}
			}
			for !s.broken.Load() {
				last := d.feed.lastSeq.Load()
				if sseq <= last || d.feed.lastSeq.CompareAndSwap(last, sseq) {
					break
				}
			}
		}
		d.handleResult(msg)
	}
}

// current returns the result consumer in use, nil while there is none.
func (d *Dispatcher) current() *resultSub { return d.feed.sub.Load() }

// kick asks the watchdog to replace the result consumer now.
func (d *Dispatcher) kick(why string) {
	select {
	case d.feed.kicked <- why:
	default: // a replacement is already asked for
	}
}

// watchResults is the result consumer's watchdog. It replaces the consumer
// when asked to (messages lost, the consumer deleted), and every
// ResultCheckInterval while calls wait and no result came for that long,
// it asks the server about the consumer: when it cannot say, or results
// wait undelivered, or results it delivered never arrived, the watchdog
// makes a new consumer starting after the last result handled. A failed
// replacement is tried again after a short jittered backoff (0.1 s doubling
// to 1 s). It returns when the dispatcher's life ends.
func (d *Dispatcher) watchResults(life context.Context) {
	every := d.cfg.ResultCheckInterval
	t := time.NewTicker(every)
	defer t.Stop()
	var retry <-chan time.Time // after a failed replacement
	failed := 0
	for {
		var why string
		select {
		case <-life.Done():
			return
		case why = <-d.feed.kicked:
		case <-retry:
			why = "the last replacement failed"
		case <-t.C:
			if d.current() == nil {
				why = "the last replacement failed"
				break
			}
			last := time.Unix(0, d.feed.lastResult.Load())
			if time.Since(last) < every || time.Since(d.feed.quietSince) < every {
				continue
			}
			if pending, _ := d.calls.stats(); pending == 0 {
				continue
			}
			if why = d.resultsStuck(every); why == "" {
				continue
			}
		}
		retry = nil
		if d.replaceResults(why) {
			failed = 0
		} else {
			// Soon, not at the next tick: a new name gets a new placement.
			failed++
			retry = time.After(jetstream.RepublishDelay(failed))
		}
		// A new consumer gets a whole interval to deliver before it is
		// judged (a slow check leaves a tick waiting in t.C).
		d.feed.quietSince = time.Now()
		t.Reset(every)
	}
}

// resultsStuck asks the server about the current result consumer and says
// why it must be replaced, or "" when it is fine (no result is waiting: the
// tools are only slow).
func (d *Dispatcher) resultsStuck(timeout time.Duration) string {
	s := d.current()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	info, err := s.Info(ctx)
	switch {
	case err != nil:
		return "its state cannot be read: " + err.Error()
	case info.NumPending > 0:
		return fmt.Sprintf("%d results wait undelivered", info.NumPending)
	case info.Delivered.Consumer > s.lastCons.Load():
		return fmt.Sprintf("%d results were sent but never arrived", info.Delivered.Consumer-s.lastCons.Load())
	}
	return ""
}

// replaceResults stops the current result consumer and makes a new one
// starting after the last result handled, and reports whether it did. On
// failure there is no consumer until the next try.
func (d *Dispatcher) replaceResults(why string) bool {
	if old := d.feed.sub.Swap(nil); old != nil {
		old.Stop()
		go d.deleteResults(old)
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(d.cfg.ResultCheckInterval, resultsCreateWait))
	defer cancel()
	from := d.feed.lastSeq.Load() + 1
	s, err := d.subscribeResults(ctx, from)
	if err != nil {
		d.log.Warn("the result consumer stopped delivering and making a new one failed; trying again",
			slog.String("why", why), slog.Any("error", err))
		return false
	}
	d.feed.sub.Store(s) // Stop waits for the watchdog before it stops d.feed.sub
	d.feed.restarts.Add(1)
	d.log.Warn("the result consumer stopped delivering; made a new one",
		slog.String("why", why), slog.String("consumer", s.Name()), slog.Uint64("from_seq", from))
	return true
}

// deleteResults deletes a result consumer no longer used (best effort).
func (d *Dispatcher) deleteResults(s *resultSub) { s.Delete() }

// ackSequences reads the stream and consumer sequences of a JetStream
// message from its reply subject, as js.Msg's Metadata does without
// allocating its answer: $JS.ACK.<stream>.<consumer>.<delivered>.<stream
// seq>.<consumer seq>.<time>.<pending> (9 tokens), or with
// <domain>.<account hash> after $JS.ACK and possibly a token at the end
// (11 or more). ok is false for any other subject.
func ackSequences(reply string) (stream, consumer uint64, ok bool) {
	rest, found := strings.CutPrefix(reply, "$JS.ACK.")
	if !found {
		return 0, 0, false
	}
	skip := 0 // tokens of rest before the stream sequence
	switch n := strings.Count(reply, ".") + 1; {
	case n == 9:
		skip = 3
	case n >= 11:
		skip = 5
	default:
		return 0, 0, false
	}
	for range skip {
		_, rest, _ = strings.Cut(rest, ".")
	}
	s, rest, _ := strings.Cut(rest, ".")
	c, _, _ := strings.Cut(rest, ".")
	stream, ok1 := parseSeq(s)
	consumer, ok2 := parseSeq(c)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return stream, consumer, true
}

// parseSeq reads a sequence number of an ack subject: decimal digits.
func parseSeq(s string) (uint64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return n, true
}
