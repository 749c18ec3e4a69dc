package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/natstest"
)

// Tracing is off (nil, nothing deferred) without OTEL_* asking for
// traces; on, it defers the flush, which runs after every component
// deferred later; a protocol it cannot export with is a usage error
// naming the variable.
func TestTracing(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
		"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
	}
	log := natstest.Logger(t)
	ctx := context.Background()

	sd := &Shutdown{Role: "worker", Logger: log}
	p, err := Tracing(ctx, sd, "toolpool-worker", log)
	if err != nil || p != nil || len(sd.steps) != 0 {
		t.Fatalf("off: Tracing = %v, %v with %d steps; want nil, nil, none", p, err, len(sd.steps))
	}

	// An endpoint nobody listens on: nothing is exported, so the flush
	// has nothing to send.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	p, err = Tracing(ctx, sd, "toolpool-worker", log)
	if err != nil || p == nil || !p.Tracer().On() {
		t.Fatalf("on: Tracing = %v, %v", p, err)
	}
	var order []string
	sd.Defer("workers", NoDrain, func(context.Context) error { order = append(order, "workers"); return nil }, "")
	sd.steps[0].stop = func(stop func(context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error { order = append(order, "tracing"); return stop(ctx) }
	}(sd.steps[0].stop)
	sd.Stop()
	if strings.Join(order, ",") != "workers,tracing" {
		t.Errorf("stop order %v, want the workers, then the tracing flush", order)
	}

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	_, err = Tracing(ctx, &Shutdown{}, "toolpool-worker", log)
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc") {
		t.Errorf("grpc: err = %v; want a usage error naming the variable", err)
	}
}
