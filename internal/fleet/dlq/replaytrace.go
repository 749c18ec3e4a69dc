package dlq

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Attributes of the replay span.
const (
	attrOriginalID = attribute.Key("toolpool.call.original_id")
	attrDLQSeq     = attribute.Key("toolpool.dlq.seq")
	attrStreamSeq  = attribute.Key("toolpool.stream.seq")
)

// startReplaySpan starts the span "replay <tool>" of the replay of call
// (ReplayCall's), dead-lettered at seq: a child of ctx's span if it has
// one (a new trace otherwise), linked to the dead letter's trace, the one
// the call ran in. The call's traceparent becomes the span's, so that
// the replayed call's attempts are the span's children.
func startReplaySpan(ctx context.Context, tr *tracing.Tracer, call *envelope.Call, seq uint64) trace.Span {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			tracing.GenAIToolName.String(call.Tool), tracing.GenAIToolCallID.String(call.ID),
			tracing.CallKey.String(call.Key), attrOriginalID.String(call.OriginalID),
			attrDLQSeq.String(strconv.FormatUint(seq, 10)),
		),
	}
	if sc, ok := tracing.ParseTraceparent(call.Traceparent); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
			Attributes: []attribute.KeyValue{attribute.String("toolpool.link", "dead_letter")}}))
	}
	if call.Tenant != "" {
		opts = append(opts, trace.WithAttributes(tracing.Tenant.String(call.Tenant)))
	}
	if call.Session != "" {
		opts = append(opts, trace.WithAttributes(tracing.Session.String(call.Session)))
	}
	_, span := tr.Start(ctx, "replay "+call.Tool, opts...) // DecodeCall checked the name
	if tp := tracing.Traceparent(span.SpanContext()); tp != "" {
		call.Traceparent = tp
	}
	return span
}

// endReplaySpan ends a replay's span with what became of it.
func endReplaySpan(span trace.Span, r Replayed, err error) {
	switch {
	case err != nil:
		span.SetAttributes(tracing.ErrorType.String("publish"))
		span.SetStatus(codes.Error, err.Error())
	case r.Err != nil:
		span.SetAttributes(tracing.ErrorType.String("not_replayable"))
		span.SetStatus(codes.Error, r.Err.Error())
	case r.Duplicate:
		span.AddEvent("dedup", trace.WithAttributes(attribute.String("toolpool.dedup", "duplicate")))
	}
	span.End()
}
