// Package tracing is toolpool's OpenTelemetry side: a tracer provider set
// up from the standard OTEL_* environment variables (off unless they ask
// for an exporter), the attribute names the spans use (OpenTelemetry's
// GenAI conventions for tool execution, toolpool's own for the rest), and
// the bridge between a span's context and the W3C traceparent a call
// carries in its envelope.
//
// Every component takes a *Tracer; a nil one is off and costs one nil
// check per call site, so a pool without tracing pays nothing.
package tracing

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of toolpool's spans.
const ScopeName = "github.com/toolpool/toolpool"

// Attribute keys. The gen_ai.* and error.type keys are OpenTelemetry's
// semantic conventions; toolpool.* are toolpool's own.
const (
	GenAIOperationName = semconv.GenAIOperationNameKey // "execute_tool" on a worker's attempt
	GenAIToolName      = semconv.GenAIToolNameKey
	GenAIToolCallID    = semconv.GenAIToolCallIDKey
	ErrorType          = semconv.ErrorTypeKey // "<class>" or "<class>.<code>", e.g. "transient.http_503"

	Attempt    = attribute.Key("toolpool.attempt")   // 1-based delivery number
	WorkerID   = attribute.Key("toolpool.worker.id") // the worker that ran the attempt
	CallKey    = attribute.Key("toolpool.call.key")  // the call's key (dedup scope + id)
	Tenant     = attribute.Key("toolpool.tenant")    // the caller's tenant, when there is one
	Session    = attribute.Key("toolpool.session")   // the agent's session, when there is one
	Instance   = attribute.Key("toolpool.instance")  // the orchestrator instance
	Front      = attribute.Key("toolpool.front")     // "http", "mcp", "go", "task"
	Outcome    = attribute.Key("toolpool.outcome")   // e.g. "success", "error", "dead_letter", "cache_hit"
	QueueWait  = attribute.Key("toolpool.queue.wait_ms")
	RetryDelay = attribute.Key("toolpool.retry.delay_ms")
)

// ExecuteTool is the value of GenAIOperationName on a worker's attempt
// span, whose name is "execute_tool <tool>".
const ExecuteTool = "execute_tool"

// Tracer starts toolpool's spans. A nil *Tracer is off: On reports false
// and callers skip their spans.
type Tracer struct {
	t trace.Tracer
}

// NewTracer returns a Tracer on tp, or nil (off) for a nil tp.
func NewTracer(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{t: tp.Tracer(ScopeName)}
}

// On reports whether spans are recorded.
func (t *Tracer) On() bool { return t != nil }

// Start starts a span (see trace.Tracer.Start). It must not be called on a
// nil Tracer.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return t.t.Start(ctx, name, opts...)
}

// Remote returns ctx with the span context of a W3C traceparent as its
// remote parent; ctx unchanged when traceparent is not valid.
func Remote(ctx context.Context, traceparent string) context.Context {
	sc, ok := ParseTraceparent(traceparent)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// ParseTraceparent parses a version-00 W3C traceparent.
func ParseTraceparent(s string) (trace.SpanContext, bool) {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if _, err := hex.Decode(tid[:], []byte(s[3:35])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(s[36:52])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(flags[:], []byte(s[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

// Traceparent formats a span context as a W3C traceparent; "" when it is
// not valid.
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// FromContext is Traceparent of the span in ctx.
func FromContext(ctx context.Context) string {
	return Traceparent(trace.SpanContextFromContext(ctx))
}

// Provider is a tracer provider set up from the environment, with the
// exporter it flushes on Shutdown.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Tracer returns a Tracer of the provider; nil (off) for a nil Provider.
func (p *Provider) Tracer() *Tracer {
	if p == nil {
		return nil
	}
	return NewTracer(p.tp)
}

// TracerProvider returns the OpenTelemetry provider, or nil.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.tp
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// Enabled reports whether the environment asks for traces, as
// FromEnv reads it: OTEL_SDK_DISABLED is not "true", OTEL_TRACES_EXPORTER
// is not "none", and it is "otlp" or an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv sets up a tracer provider from the OTEL_* environment: nil, nil
// when tracing is off (Enabled). The exporter is OTLP over HTTP
// (http/protobuf, the OpenTelemetry default, port 4318); the endpoint,
// headers, timeout and TLS settings are the exporter's own OTEL_EXPORTER_OTLP_*
// variables, the sampler is OTEL_TRACES_SAMPLER/OTEL_TRACES_SAMPLER_ARG
// (default parentbased_always_on), and the service name is
// OTEL_SERVICE_NAME, else service (e.g. "toolpool-orchestrator"), with
// OTEL_RESOURCE_ATTRIBUTES added. version is the build's, as
// service.version.
func FromEnv(ctx context.Context, service, version string) (*Provider, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		p := strings.TrimSpace(os.Getenv(v))
		if p == "" {
			continue
		}
		if p != "http/protobuf" {
			return nil, fmt.Errorf("tracing: %s=%s is not supported: toolpool exports OTLP over HTTP (http/protobuf, usually port 4318)", v, p)
		}
		break
	}
	if exp := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); exp != "" && exp != "otlp" && exp != "none" {
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%s is not supported: use otlp or none", exp)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.version", version)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	if os.Getenv("OTEL_SERVICE_NAME") == "" && !strings.Contains(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		res, err = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", service)))
		if err != nil {
			return nil, fmt.Errorf("tracing: resource: %w", err)
		}
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
	)
	return &Provider{tp: tp}, nil
}
