package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Tracing. With Config.Tracer on, every request to the Handler is a
// server span named by its method and route ("POST /v1/tool_calls",
// "GET /v1/tool_calls/{id}", "GET /v1/tools"; the method alone for a
// path the API does not serve), a child of the request's traceparent
// header when it is valid. The calls of a POST /v1/tool_calls are its
// children (the dispatcher's "call <tool>" spans), and so are an async
// request's, whose task keeps the span's traceparent for the replica
// that runs it. The answer's traceparent header is the span's.

// route is the route of a request to the Handler, for the span's name
// and http.route; "" for a path it does not serve.
func route(path string) string {
	switch {
	case path == PathToolCalls:
		return PathToolCalls
	case path == PathTools:
		return PathTools
	case strings.HasPrefix(path, PathToolCalls+"/"):
		return PathToolCalls + "/{id}"
	}
	return ""
}

// startSpan starts r's server span and returns the request carrying it,
// and the writer that notes the answer's status for end.
func (h *Handler) startSpan(w http.ResponseWriter, r *http.Request) (*metrics.StatusWriter, *http.Request, trace.Span) {
	ctx := r.Context()
	if tp := r.Header.Get(envelope.HeaderTraceparent); tp != "" {
		ctx = tracing.Remote(ctx, tp) // ignored when not valid
	}
	rt, name := route(r.URL.Path), r.Method
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(r.Method), tracing.Front.String(FrontHTTP))}
	if rt != "" {
		name += " " + rt
		opts = append(opts, trace.WithAttributes(semconv.HTTPRouteKey.String(rt)))
	}
	ctx, span := h.cfg.Tracer.Start(ctx, name, opts...)
	return &metrics.StatusWriter{ResponseWriter: w}, r.WithContext(ctx), span
}

// endSpan ends a request's span with the answer's status: an error for
// a 5xx (OpenTelemetry's rule for server spans), error.type its code.
func endSpan(span trace.Span, sw *metrics.StatusWriter) {
	status := sw.Status()
	span.SetAttributes(semconv.HTTPResponseStatusCodeKey.Int(status))
	if status >= 500 {
		code := strconv.Itoa(status)
		span.SetAttributes(tracing.ErrorType.String(code))
		span.SetStatus(codes.Error, code)
	}
	span.End()
}

// spanTenant records the caller's tenant on r's span.
func spanTenant(r *http.Request, tenant string) {
	if tenant != "" {
		trace.SpanFromContext(r.Context()).SetAttributes(tracing.Tenant.String(tenant))
	}
}
