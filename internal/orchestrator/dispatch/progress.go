package dispatch

import (
	"context"

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
