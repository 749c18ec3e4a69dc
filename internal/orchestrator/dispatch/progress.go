package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// ProgressFunc receives the progress the tool of one call reports
// (tools.ReportProgress), with the call's tool_use id, in the order the
// tool reported it (at most one report per call every 100 ms: the worker
// drops the ones in between). It runs on the goroutine of the dispatcher's
// progress subscription, one report at a time: it must not block. A report
// that comes after the call's result is not delivered.
type ProgressFunc func(callID string, p tools.Progress)

type progressKey struct{}

// WithProgress returns ctx carrying f: Dispatch with it asks the workers
// for the calls' progress and hands each report to f.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// ProgressFrom is the ProgressFunc of ctx, nil when none.
func ProgressFrom(ctx context.Context) ProgressFunc {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f
}

// Progress. A worker publishes the reports of a call whose message has
// jetstream.HeaderProgress (set when the Dispatch's ctx carries a
// ProgressFunc) on tools.progress.<instance>.<key>, at most one every
// 100 ms; the dispatcher subscribes to its instance's and hands each report
// to the ProgressFunc of every Dispatch waiting for that call.

// subscribeProgress subscribes to the progress reports for this instance.
func (d *Dispatcher) subscribeProgress() error {
	sub, err := d.nc.Subscribe(jetstream.ProgressFilter(d.cfg.Instance), d.handleProgress)
	if err != nil {
		return err
	}
	d.progressSub = sub
	return nil
}

// handleProgress hands a progress report to the waiters of its call.
func (d *Dispatcher) handleProgress(m *nats.Msg) {
	key := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var buf [4]progressTarget
	targets := d.calls.progressOf(key, buf[:0])
	if len(targets) == 0 {
		return
	}
	var p tools.Progress
	if err := json.Unmarshal(m.Data, &p); err != nil {
		d.log.Debug("dropping a malformed progress report", slog.String("subject", m.Subject), slog.Any("error", err))
		return
	}
	for _, pt := range targets {
		pt.f(pt.id, p)
	}
}
