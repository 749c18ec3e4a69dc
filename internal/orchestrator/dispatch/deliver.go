package dispatch

import (
	"log/slog"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// handleResult is the result consumer's handler. It runs on one goroutine,
// except for the moment the watchdog replaces the consumer, when the old
// one may still finish a message: everything it touches is safe for that.
func (d *Dispatcher) handleResult(msg js.Msg) {
	d.feed.lastResult.Store(time.Now().UnixNano())
	d.deliverResult(msg.Subject(), msg.Data(), false)
}

// deliverResult decodes a result that came on subject and hands it to the
// waiters of its call key. watched says it came from a duplicate watch:
// then a result already delivered is not counted as a duplicate (the
// consumer may well have brought it too).
func (d *Dispatcher) deliverResult(subject string, data []byte, watched bool) {
	res, err := envelope.DecodeResult(data)
	if err != nil {
		d.log.Warn("dropping a malformed result", slog.String("subject", subject), slog.Any("error", err))
		return
	}
	// The subject names the call (tools.result.<instance>.<key>): a result
	// whose body names another call is not delivered to either, so a
	// publisher cannot answer one call with another's result.
	key := subject[strings.LastIndexByte(subject, '.')+1:]
	if res.Key != "" && res.Key != key {
		d.log.Warn("dropping a result whose key is not its subject's", slog.String("subject", subject), slog.String("key", res.Key))
		return
	}
	now := time.Now()
	outcome, tool, _ := d.calls.deliver(key, arrival{res: res, data: data}, now, func(tool string, start time.Time) {
		d.metrics.ResultReceived(tool, res.Class, now.Sub(start))
		if d.cfg.OnResult != nil {
			d.cfg.OnResult(tool, res)
		}
	})
	if watched && outcome != outcomeDelivered {
		return
	}
	switch outcome {
	case outcomeDelivered:
	case outcomeLate:
		d.metrics.LateResult(tool)
		d.log.Debug("late result", slog.String("call_id", res.CallID), slog.String("tool", tool), slog.Int("attempt", res.Attempts))
	case outcomeDuplicate:
		d.metrics.DuplicateResult(tool)
		d.log.Debug("duplicate result", slog.String("call_id", res.CallID), slog.String("tool", tool), slog.Int("attempt", res.Attempts))
	default:
		d.log.Debug("result for an unknown call", slog.String("call_id", res.CallID), slog.String("tool", res.Tool))
	}
}
