package tools

import "context"

// Progress is how far a call has come, as a tool reports it: Progress out
// of Total (Total 0: unknown), with an optional Message for the caller.
// The values only need to increase; they are not percentages.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

type progressKey struct{}

// ReportProgress tells the caller of the call ctx belongs to how far it
// has come: the worker carries it back to the caller that asked for
// progress (an MCP client's progressToken), and it keeps the call alive in
// JetStream. Outside a call, or when nobody listens, it does nothing. A
// handler may call it as often as it likes; the worker may drop reports
// that come faster than it forwards them.
func ReportProgress(ctx context.Context, p Progress) {
	if f, ok := ctx.Value(progressKey{}).(func(Progress)); ok && f != nil {
		f(p)
	}
}

// WithProgressReporter returns ctx carrying f, which ReportProgress calls:
// the worker sets it on each call's context.
func WithProgressReporter(ctx context.Context, f func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}
