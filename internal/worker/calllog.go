package worker

import (
	"context"
	"log/slog"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// callLogger returns the logger of one delivery of call: the worker's
// logger with the call's attributes (tool, call_id, attempt, session, and
// traceparent when there is one).
//
// Logger.With would format those attributes for every call, and most calls
// log nothing; this logger keeps them as they are and adds them, ahead of
// the record's own, only to records that are logged.
func (w *Worker) callLogger(tool string, call *envelope.Call, attempt int) *slog.Logger {
	return slog.New(w.callHandlerOf(tool, call, attempt))
}

// callHandlerOf is the handler of callLogger.
func (w *Worker) callHandlerOf(tool string, call *envelope.Call, attempt int) *callHandler {
	return &callHandler{
		h: w.cfg.Logger.Handler(), tool: tool, id: call.ID, attempt: attempt,
		session: call.Session, traceparent: call.Traceparent,
	}
}

// callLog is callLogger for the job's delivery of call, kept in the job:
// the handler and the logger are fields of the job, allocated with it.
// Process calls it once the message decoded, before it sets j.call.
func (j *job) callLog(call *envelope.Call) *slog.Logger {
	j.logH = *j.w.callHandlerOf(j.served.tool.Name, call, j.attempt)
	j.log = *slog.New(&j.logH)
	return &j.log
}

// callHandler adds a call's attributes to the records its base handler
// logs.
type callHandler struct {
	h                              slog.Handler
	tool, id, session, traceparent string
	attempt                        int
}

func (c *callHandler) attrs() []slog.Attr {
	as := []slog.Attr{
		slog.String("tool", c.tool), slog.String("call_id", c.id),
		slog.Int("attempt", c.attempt), slog.String("session", c.session),
	}
	if c.traceparent != "" {
		as = append(as, slog.String("traceparent", c.traceparent))
	}
	return as
}

func (c *callHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return c.h.Enabled(ctx, level)
}

func (c *callHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(c.attrs()...)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return c.h.Handle(ctx, out)
}

func (c *callHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return c.h.WithAttrs(c.attrs()).WithAttrs(as)
}

func (c *callHandler) WithGroup(name string) slog.Handler {
	return c.h.WithAttrs(c.attrs()).WithGroup(name)
}
