package worker

import (
	"context"
	"time"
	"unicode/utf8"

	js "github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// A worker's spans, with tracing on (Config.Tracer): per delivery of a
// call, one "execute_tool <tool>" span, a child of the call's traceparent
// (the orchestrator's "call <tool>" span), from the delivery to its
// settle; on the first delivery also a "queued <tool>" span, from the
// call message's JetStream timestamp to the delivery: the time it waited
// for a worker. The handler's context carries the execute_tool span, and
// the tool's CallInfo.Traceparent is that span's (so webhook and
// http_request send it on). With tracing off a delivery pays the nil
// checks only: j.tr stays nil.

// jobTrace is a traced delivery's execute_tool span and its traceparent
// (what CallInfo gives the handler).
type jobTrace struct {
	span        trace.Span
	traceparent string
}

// Attribute keys of the worker's span events that the tracing package does
// not name.
const (
	attrDLQReason      = attribute.Key("toolpool.dlq.reason")      // dead_letter: why
	attrHandBackReason = attribute.Key("toolpool.handback.reason") // handed_back: why
	attrExecMS         = attribute.Key("toolpool.exec_ms")         // the handler's run time
)

// statusMessageMax caps the span status's description (the decision's
// cause): a tool's error message may be long.
const statusMessageMax = 512

// startSpans starts the spans of the delivery j, which began at start:
// call is the decoded call, nil for a message that does not decode (its
// span is then the root of a trace of its own). With tracing on only.
func (w *Worker) startSpans(j *job, meta *js.MsgMetadata, start time.Time, tool string, call *envelope.Call) {
	ctx := context.Background()
	var id, tp string
	if call != nil {
		id, tp = call.ID, call.Traceparent
		ctx = tracing.Remote(ctx, tp)
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		tracing.GenAIOperationName.String(tracing.ExecuteTool),
		tracing.GenAIToolName.String(tool),
		tracing.Attempt.Int(j.attempt),
		tracing.WorkerID.String(w.cfg.WorkerID))
	if id != "" {
		attrs = append(attrs, tracing.GenAIToolCallID.String(id))
	}
	if call != nil {
		attrs = appendNonEmpty(attrs, tracing.CallKey, call.Key)
		attrs = appendNonEmpty(attrs, tracing.Session, call.Session)
		attrs = appendNonEmpty(attrs, tracing.Tenant, call.Tenant)
	}
	if j.attempt == 1 && !meta.Timestamp.IsZero() {
		// The publish time is the server's clock: a worker's clock behind
		// it would make the wait negative.
		queued := meta.Timestamp
		if queued.After(start) {
			queued = start
		}
		wait := start.Sub(queued)
		attrs = append(attrs, tracing.QueueWait.Int64(wait.Milliseconds()))
		qattrs := []attribute.KeyValue{tracing.GenAIToolName.String(tool), tracing.QueueWait.Int64(wait.Milliseconds())}
		if id != "" {
			qattrs = append(qattrs, tracing.GenAIToolCallID.String(id))
		}
		_, q := w.cfg.Tracer.Start(ctx, "queued "+tool, trace.WithTimestamp(queued),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(qattrs...))
		q.End(trace.WithTimestamp(start))
	}
	_, span := w.cfg.Tracer.Start(ctx, tracing.ExecuteTool+" "+tool, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	j.tr = &jobTrace{span: span, traceparent: tracing.Traceparent(span.SpanContext())}
}

// appendNonEmpty appends key=v to attrs unless v is empty.
func appendNonEmpty(attrs []attribute.KeyValue, key attribute.Key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, key.String(v))
}

// handlerContext is the parent of the handler's context of j: the
// worker's, carrying the execute_tool span when tracing is on.
func (w *Worker) handlerContext(j *job) context.Context {
	if j.tr == nil {
		return w.calls
	}
	return trace.ContextWithSpan(w.calls, j.tr.span)
}

// endSpan ends the execute_tool span of the delivery d, with its verdict v
// (settled: its settle went through; else the call was handed back): the
// outcome, the error's type and status on a failure, the events of a
// retry, a dead letter or a hand-back.
func (w *Worker) endSpan(j *job, d *delivery, v classify.Verdict, ev *Event, settled bool) {
	span := j.tr.span
	defer span.End()
	if !span.IsRecording() {
		return
	}
	fate := v.Fate
	if !settled {
		fate = classify.FateHandedBack
	}
	span.SetAttributes(tracing.Outcome.String(string(fate)))
	if ev.Executed {
		span.SetAttributes(attrExecMS.Int64(ev.ExecTime.Milliseconds()))
	}
	dec := d.Decision
	if dec.Class != "" {
		et := errorType(dec)
		span.SetAttributes(tracing.ErrorType.String(et))
		span.SetStatus(codes.Error, truncateUTF8(dec.Cause, statusMessageMax))
	}
	switch {
	case !settled:
		span.AddEvent("handed_back", trace.WithAttributes(attrHandBackReason.String("settle_failed")))
	case v.Fate == classify.FateRetry:
		span.AddEvent("retry", trace.WithAttributes(tracing.RetryDelay.Int64(v.Delay.Milliseconds()),
			tracing.ErrorType.String(errorType(dec))))
	case v.Fate == classify.FateHandedBack:
		span.AddEvent("handed_back", trace.WithAttributes(attrHandBackReason.String(d.Case.String()),
			tracing.RetryDelay.Int64(v.Delay.Milliseconds())))
	}
	if v.DeadLetters() {
		span.AddEvent("dead_letter", trace.WithAttributes(attrDLQReason.String(string(v.Reason))))
	}
}

// errorType is the error.type of a decision: "<class>.<code>", or the
// class alone when it has no code.
func errorType(d classify.Decision) string {
	if d.Code == "" {
		return string(d.Class)
	}
	return string(d.Class) + "." + d.Code
}

// truncateUTF8 cuts s to at most n bytes, on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
