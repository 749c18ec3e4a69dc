package tools

import (
	"context"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/toolpool/toolpool/internal/infra/callctx"
)

// Progress is how far a call has come, as a tool reports it: Progress out
// of Total (Total 0: unknown), with an optional Message for the caller.
// The values only need to increase; they are not percentages.
type Progress struct {
	Progress float64 `json:"progress"`          // how much is done, in the tool's own unit
	Total    float64 `json:"total,omitempty"`   // how much there is to do; 0: unknown
	Message  string  `json:"message,omitempty"` // what the tool is doing now, for people
}

// MaxProgressMessageBytes bounds a Progress's Message as it travels to
// the caller: a longer message is cut at a character boundary and ends
// with "…" (see Progress.Bounded).
const MaxProgressMessageBytes = 1024

// Bounded is p as the worker sends it: a Message longer than
// MaxProgressMessageBytes is cut at a character boundary (invalid UTF-8
// replaced) and ends with "…", and a Progress or Total that is not a
// finite number, which JSON cannot carry, becomes 0.
func (p Progress) Bounded() Progress {
	finite := func(f float64) float64 {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	}
	p.Progress, p.Total = finite(p.Progress), finite(p.Total)
	if !utf8.ValidString(p.Message) {
		p.Message = strings.ToValidUTF8(p.Message, "\uFFFD")
	}
	if len(p.Message) > MaxProgressMessageBytes {
		const ellipsis = "…"
		cut := MaxProgressMessageBytes - len(ellipsis)
		for cut > 0 && !utf8.RuneStart(p.Message[cut]) {
			cut--
		}
		p.Message = p.Message[:cut] + ellipsis
	}
	return p
}

// A ProgressReporter receives the progress reports of one call: the
// worker running it implements one per call. It must be safe for
// concurrent use.
type ProgressReporter interface {
	ReportProgress(Progress)
}

type progressKey struct{}

// progressFunc is a func(Progress) as a ProgressReporter.
type progressFunc func(Progress)

func (f progressFunc) ReportProgress(p Progress) { f(p) }

// noProgress is the reporter of WithProgressReporter(ctx, nil): reports go
// nowhere, not to a reporter further out.
type noProgress struct{}

func (noProgress) ReportProgress(Progress) {}

// ReportProgress tells the caller of the call ctx belongs to how far it
// has come: the worker carries it back to the caller that asked for
// progress (an MCP client's progressToken), and it keeps the call alive in
// JetStream. Outside a call, or when nobody listens, it does nothing. A
// handler may call it as often as it likes; the worker may drop reports
// that come faster than it forwards them (the last one is sent).
func ReportProgress(ctx context.Context, p Progress) {
	if v := ctx.Value(progressKey{}); v != nil {
		if r, ok := v.(ProgressReporter); ok {
			r.ReportProgress(p)
		}
		return
	}
	if c, ok := ctx.Value(callctx.Key{}).(runningCall); ok && c != nil {
		c.ReportProgress(p)
	}
}

// WithProgressReporter returns ctx carrying f, which ReportProgress calls.
func WithProgressReporter(ctx context.Context, f func(Progress)) context.Context {
	if f == nil {
		return context.WithValue(ctx, progressKey{}, noProgress{})
	}
	return context.WithValue(ctx, progressKey{}, progressFunc(f))
}

// WithReporter returns ctx carrying r, which ReportProgress calls (before
// the reporter of the call the worker's context carries).
func WithReporter(ctx context.Context, r ProgressReporter) context.Context {
	if r == nil {
		return context.WithValue(ctx, progressKey{}, noProgress{})
	}
	return context.WithValue(ctx, progressKey{}, r)
}
