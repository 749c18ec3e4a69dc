package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// resultReplayMargin is how far before the last result handled a replaced
// result consumer starts, so that clock differences between this process
// and the server cannot skip a result. Results delivered twice that way are
// counted as duplicates and otherwise ignored.
const resultReplayMargin = 5 * time.Second

// consumeResults makes an ordered consumer on this dispatcher's result
// subject and starts consuming it.
func (d *Dispatcher) consumeResults(ctx context.Context, cfg js.OrderedConsumerConfig) (js.Consumer, js.ConsumeContext, error) {
	cons, err := d.js.OrderedConsumer(ctx, jetstream.StreamResults, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("result consumer on %s: %w", jetstream.StreamResults, err)
	}
	cc, err := cons.Consume(d.handleResult, js.ConsumeErrHandler(func(_ js.ConsumeContext, err error) {
		d.log.Warn("result consumer", slog.Any("error", err))
	}))
	if err != nil {
		return nil, nil, fmt.Errorf("consume results: %w", err)
	}
	return cons, cc, nil
}

// watchResults is the result consumer's watchdog. The ordered consumer is a
// single-replica consumer that nats.go makes again when it notices a
// problem; after a cluster node died it was seen to stop delivering for
// minutes without noticing, while every result sat in TOOL_RESULTS. So
// every ResultCheckInterval, when calls wait and no result came for that
// long, the watchdog asks the server about the consumer: when it is gone or
// has results it has not delivered, the watchdog stops it and makes a new
// one that starts a little before the last result handled.
func (d *Dispatcher) watchResults() {
	defer close(d.watchDone)
	every := d.cfg.ResultCheckInterval
	t := time.NewTicker(every)
	defer t.Stop()
	quietSince := d.startedAt // the last result, start or replacement
	for {
		select {
		case <-d.stopped:
			return
		case <-t.C:
		}
		last := time.Unix(0, d.lastResult.Load())
		if last.Before(d.startedAt) {
			last = d.startedAt
		}
		if time.Since(last) < every || time.Since(quietSince) < every {
			continue
		}
		if pending, _ := d.calls.stats(); pending == 0 {
			continue
		}
		why := d.resultsStuck(every)
		if why == "" {
			continue
		}
		d.restartResults(last.Add(-resultReplayMargin), why)
		// A new consumer gets a whole interval to deliver before it is
		// judged (a slow check leaves a tick waiting in t.C).
		quietSince = time.Now()
		t.Reset(every)
	}
}

// resultsStuck asks the server about the current result consumer and says
// why it must be replaced, or "" when it is fine (no result is waiting: the
// tools are only slow).
func (d *Dispatcher) resultsStuck(timeout time.Duration) string {
	d.mu.Lock()
	cons := d.cons
	d.mu.Unlock()
	if cons == nil {
		return "no result consumer"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	info, err := cons.Info(ctx)
	switch {
	case err != nil:
		return "its state cannot be read: " + err.Error()
	case info.NumPending > 0:
		return fmt.Sprintf("%d results wait undelivered", info.NumPending)
	}
	return ""
}

// restartResults replaces the result consumer with one starting at from.
// On failure the old one stays stopped and the next check tries again.
func (d *Dispatcher) restartResults(from time.Time, why string) {
	d.mu.Lock()
	old := d.cc
	d.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ResultCheckInterval)
	defer cancel()
	cons, cc, err := d.consumeResults(ctx, js.OrderedConsumerConfig{
		FilterSubjects: []string{d.subject},
		DeliverPolicy:  js.DeliverByStartTimePolicy,
		OptStartTime:   &from,
	})
	if err != nil {
		d.log.Warn("the result consumer stopped delivering and making a new one failed; trying again", slog.String("why", why), slog.Any("error", err))
		return
	}
	d.mu.Lock()
	d.cons, d.cc = cons, cc // Stop waits for the watchdog before it stops d.cc
	d.mu.Unlock()
	d.restarts.Add(1)
	d.log.Warn("the result consumer stopped delivering; made a new one", slog.String("why", why), slog.Time("from", from))
}
