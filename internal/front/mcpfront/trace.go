package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Tracing. With Config.Tracer on, every tools/call (through the go-sdk,
// either fast path, stdio, or a task-augmented call) is a server span
// "tools/call <tool>", a child of the request's trace context when it
// sends one — params._meta.traceparent (OpenTelemetry's MCP
// conventions), else the HTTP request's traceparent header — and the
// parent of the call's span ("call <tool>", the dispatcher's). A task's
// calls run under the span of the request that created it, on whichever
// replica runs it.

// metaTraceparent is the _meta key of a request's W3C trace context.
const metaTraceparent = "traceparent"

// attrMCPMethod is OpenTelemetry's mcp.method.name.
const attrMCPMethod = attribute.Key("mcp.method.name")

// traceparentOf is a tools/call's trace context: _meta's, else the HTTP
// header's ("" for none).
func traceparentOf(meta map[string]any, h http.Header) string {
	if tp, ok := meta[metaTraceparent].(string); ok && tp != "" {
		return tp
	}
	if h != nil {
		return h.Get(envelope.HeaderTraceparent)
	}
	return ""
}

// rawMetaTraceparent is the traceparent of a request's raw _meta ("" for
// none).
func rawMetaTraceparent(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var m struct {
		Traceparent string `json:"traceparent"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.Traceparent
}

// startCallSpan starts the span of one tools/call of tool, under
// traceparent when it is valid, and returns ctx carrying it.
func (s *Server) startCallSpan(ctx context.Context, tool, traceparent, tenant string) (context.Context, trace.Span) {
	if traceparent != "" {
		ctx = tracing.Remote(ctx, traceparent) // ignored when not valid
	}
	tool = dispatch.SpanToolName(tool) // the client's text, unchecked yet
	attrs := []attribute.KeyValue{attrMCPMethod.String("tools/call"), tracing.GenAIToolName.String(tool),
		tracing.Front.String(frontName)}
	if tenant != "" {
		attrs = append(attrs, tracing.Tenant.String(tenant))
	}
	return s.cfg.Tracer.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endCallSpan ends a tools/call's span: error.type and the status Error
// for a JSON-RPC error or a tool result that is an error.
func endCallSpan(span trace.Span, res mcp.Result, err error) {
	switch r, _ := res.(*mcp.CallToolResult); {
	case err != nil:
		span.SetAttributes(tracing.ErrorType.String("jsonrpc"))
		span.SetStatus(codes.Error, err.Error())
	case r != nil && r.IsError:
		span.SetAttributes(tracing.ErrorType.String("tool_error"))
		span.SetStatus(codes.Error, "the tool result is an error")
	}
	span.End()
}

// endTaskSpan ends the span of a task-augmented tools/call: it ends when
// the task is created (or refused); the call's span, its child, goes on.
func endTaskSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(tracing.ErrorType.String("jsonrpc"))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// withTraceparent is ctx with the traceparent of the call it runs: its
// tools/call span's with tracing on, else a new trace's.
func (s *Server) withTraceparent(ctx context.Context) context.Context {
	if s.cfg.Tracer.On() {
		return dispatch.WithTraceparent(ctx, tracing.FromContext(ctx))
	}
	return dispatch.WithTraceparent(ctx, dispatch.NewTraceparent())
}
