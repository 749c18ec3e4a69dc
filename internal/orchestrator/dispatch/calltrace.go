package dispatch

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Tracing. With Config.Tracer on, every call of a turn has a span
// "call <tool>" (kind producer) from its admission to its result: the
// dispatcher starts it in prepare, or adopts the one its caller started
// (WithCallSpans: the policy gate, whose steps come first). The call's
// envelope and message carry that span's traceparent, so that the
// workers' execute_tool spans are its children. Its events say what the
// dispatcher did with the call: dedup (answered from an identical call's
// result, or JetStream had the call already), fair_share.wait (held by
// the scheduler), published (the stream sequence), result. With the
// tracer off, a turn's trace field stays nil and the calls carry the
// turn's traceparent, as before.

// Names of the call span's events and attributes (besides tracing's).
const (
	eventResult    = "result"
	eventPublished = "published"
	eventFairWait  = "fair_share.wait"
	eventDedup     = "dedup"

	attrStreamSeq = attribute.Key("toolpool.stream.seq")
	attrWaitMS    = attribute.Key("toolpool.wait_ms")
	attrDedup     = attribute.Key("toolpool.dedup")
	attrAttempts  = attribute.Key("toolpool.attempts")
	attrExecMS    = attribute.Key("toolpool.exec_ms")
)

// turnTrace is a turn's tracing while Config.Tracer is on.
type turnTrace struct {
	spans []trace.Span // per call, in the calls' order
	tps   []string     // per call: its span's traceparent ("" for a span of no valid context)
	ended []bool       // per call: its span ended (own spans only)
	own   bool         // the dispatcher started the spans, and ends them
}

type callSpansKey struct{}

// WithCallSpans returns ctx carrying the spans its caller started for
// the calls it is about to Dispatch, one per call in the calls' order:
// the policy gate's, whose spans begin at admission. With Config.Tracer
// on, Dispatch adds its events to them and puts their contexts on the
// calls instead of starting spans of its own; it does not end them (the
// caller does, EndCallSpan). Spans of another count than the calls are
// ignored.
func WithCallSpans(ctx context.Context, spans []trace.Span) context.Context {
	return context.WithValue(ctx, callSpansKey{}, spans)
}

// StartCallSpan starts the span "call <tool>" of one call: a child of
// ctx's span, else of ctx's traceparent (WithTraceparent), else the root
// of a new trace. It carries the tool, the call id, the session and the
// tenant (WithTenant). tr must be on.
func StartCallSpan(ctx context.Context, tr *tracing.Tracer, tool, id, session string) trace.Span {
	ctx = parentContext(ctx)
	tool = SpanToolName(tool)
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, tracing.GenAIToolName.String(tool), tracing.GenAIToolCallID.String(id))
	if session != "" {
		attrs = append(attrs, tracing.Session.String(session))
	}
	if tenant := TenantFrom(ctx); tenant != "" {
		attrs = append(attrs, tracing.Tenant.String(tenant))
	}
	_, span := tr.Start(ctx, "call "+tool, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	return span
}

// SpanToolName is tool as span names and attributes carry it: the name,
// when it is a valid tool name (envelope.ValidToolName), else "_invalid"
// — a caller's unchecked text (an unknown tool's name may be anything, of
// any length) goes into no span.
func SpanToolName(tool string) string {
	if envelope.ValidToolName(tool) {
		return tool
	}
	return "_invalid"
}

// parentContext is ctx with the parent of its calls' spans: its own span,
// else its traceparent as a remote parent.
func parentContext(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if tp, ok := TraceparentFrom(ctx); ok {
		return tracing.Remote(ctx, tp)
	}
	return ctx
}

// EndCallSpan records r as span's result and ends it: a "result" event
// (outcome, attempts, worker, queue wait and execution time when a worker
// answered), and for an is_error result error.type ("<class>" or
// "<class>.<code>") and the status Error.
func EndCallSpan(span trace.Span, r *envelope.Result) {
	recordResult(span, r)
	span.End()
}

// recordResult records r on span as EndCallSpan does, without ending it.
func recordResult(span trace.Span, r *envelope.Result) {
	if !span.IsRecording() {
		return
	}
	outcome := "success"
	if r.IsError {
		outcome = "error"
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, tracing.Outcome.String(outcome))
	if r.Attempts > 0 {
		attrs = append(attrs, attrAttempts.Int(r.Attempts))
	}
	if r.WorkerID != "" {
		attrs = append(attrs, tracing.WorkerID.String(r.WorkerID))
	}
	if r.QueueWait > 0 {
		attrs = append(attrs, tracing.QueueWait.Int64(r.QueueWait.Milliseconds()))
	}
	if r.ExecTime > 0 {
		attrs = append(attrs, attrExecMS.Int64(r.ExecTime.Milliseconds()))
	}
	span.AddEvent(eventResult, trace.WithAttributes(attrs...))
	if r.IsError {
		et := errorType(r.Class, r.Code)
		span.SetAttributes(tracing.ErrorType.String(et))
		span.SetStatus(codes.Error, et)
	}
}

// errorType is the error.type of a failed call or attempt: "<class>", or
// "<class>.<code>" when the failure has a code; "_OTHER" (OpenTelemetry's
// fallback) without a class.
func errorType(class envelope.Class, code string) string {
	switch {
	case class == "":
		return "_OTHER"
	case code == "":
		return string(class)
	}
	return string(class) + "." + code
}

// EndCallSpanErr ends span for a call its turn failed on as a whole
// (Dispatch's error): error.type says how ("saturated", "unavailable",
// "cancelled", "deadline", else "_OTHER").
func EndCallSpanErr(span trace.Span, err error) {
	et := "_OTHER"
	var sat *SaturatedError
	switch {
	case errors.As(err, &sat):
		et = "saturated"
	case errors.Is(err, ErrUnavailable):
		et = "unavailable"
	case errors.Is(err, context.Canceled):
		et = "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		et = "deadline"
	}
	span.SetAttributes(tracing.ErrorType.String(et))
	span.SetStatus(codes.Error, err.Error())
	span.End()
}

// startTrace sets up the turn's spans, when the tracer is on: its
// caller's (WithCallSpans), else one per call started now.
func (t *turn) startTrace() {
	d := t.d
	n := len(t.calls)
	tr := &turnTrace{tps: make([]string, n)}
	if spans, ok := t.ctx.Value(callSpansKey{}).([]trace.Span); ok && len(spans) == n {
		tr.spans = spans
	} else {
		tr.own, tr.spans, tr.ended = true, make([]trace.Span, n), make([]bool, n)
		for i, c := range t.calls {
			tr.spans[i] = StartCallSpan(t.ctx, d.cfg.Tracer, c.Name, c.ID, t.session)
		}
	}
	for i, s := range tr.spans {
		tr.tps[i] = tracing.Traceparent(s.SpanContext())
		s.SetAttributes(tracing.Instance.String(d.cfg.Instance))
	}
	t.tr = tr
}

// callTraceparent is the traceparent call i carries: its span's with
// tracing on, else the turn's.
func (t *turn) callTraceparent(i int) string {
	if t.tr != nil && t.tr.tps[i] != "" {
		return t.tr.tps[i]
	}
	return t.traceparent
}

// spanEvent adds an event to call i's span (tracing on).
func (t *turn) spanEvent(i int, name string, attrs ...attribute.KeyValue) {
	if s := t.tr.spans[i]; s.IsRecording() {
		s.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// traceKey records call i's key on its span.
func (t *turn) traceKey(i int, key string) {
	t.tr.spans[i].SetAttributes(tracing.CallKey.String(key))
}

// traceDedup records that call i was answered, or is run, as another.
func (t *turn) traceDedup(i int, how string) {
	t.spanEvent(i, eventDedup, attrDedup.String(how))
}

// tracePublished records call i's stream sequence.
func (t *turn) tracePublished(i int, seq uint64, duplicate bool) {
	if duplicate {
		t.traceDedup(i, "duplicate")
	}
	t.spanEvent(i, eventPublished, attrStreamSeq.String(strconv.FormatUint(seq, 10)))
}

// traceGranted records how long held call i waited for its share.
func (t *turn) traceGranted(i int) {
	t.spanEvent(i, eventFairWait, attrWaitMS.Int64(time.Since(t.now).Milliseconds()))
}

// traceAnswered ends call i's own span with its result.
func (t *turn) traceAnswered(i int) {
	tr := t.tr
	if !tr.own || tr.ended[i] {
		return
	}
	tr.ended[i] = true
	EndCallSpan(tr.spans[i], &t.results[i])
}

// endTrace ends the turn's own spans not ended yet: with their results,
// or with err when the turn failed as a whole.
func (t *turn) endTrace(err *error) {
	tr := t.tr
	if !tr.own {
		return
	}
	for i, s := range tr.spans {
		if tr.ended[i] {
			continue
		}
		tr.ended[i] = true
		if *err != nil {
			EndCallSpanErr(s, *err)
		} else {
			EndCallSpan(s, &t.results[i])
		}
	}
}
