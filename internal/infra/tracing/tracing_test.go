package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/tracing"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
	} {
		if got := tracing.Enabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("Enabled(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

func TestTraceparentRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := tracing.ParseTraceparent(tp)
	if !ok || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("ParseTraceparent(%q) = %v, %v", tp, sc, ok)
	}
	if got := tracing.Traceparent(sc); got != tp {
		t.Errorf("Traceparent = %q, want %q", got, tp)
	}
	ctx := tracing.Remote(context.Background(), tp)
	if got := tracing.FromContext(ctx); got != tp {
		t.Errorf("FromContext(Remote) = %q, want %q", got, tp)
	}
	for _, bad := range []string{"", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01"} {
		if _, ok := tracing.ParseTraceparent(bad); ok {
			t.Errorf("ParseTraceparent(%q) accepted", bad)
		}
		if ctx := tracing.Remote(context.Background(), bad); trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("Remote(%q) gave a span context", bad)
		}
	}
}

func TestNilTracerIsOff(t *testing.T) {
	var p *tracing.Provider
	if p.Tracer().On() {
		t.Error("a nil provider's tracer is on")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
