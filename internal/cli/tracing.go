package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/tracing"
)

// TracingFlushTimeout bounds the export of the spans still buffered when
// a command ends.
const TracingFlushTimeout = 5 * time.Second

// Tracing sets up OpenTelemetry tracing from the OTEL_* environment
// (tracing.FromEnv) for a command whose service name is service
// ("toolpool-orchestrator", "toolpool-worker"; OTEL_SERVICE_NAME
// overrides it): nil, nil when the environment does not ask for traces
// (a nil *tracing.Provider is off: its Tracer is nil, its TracerProvider
// nil).
// Call it before deferring anything else to sd: the provider's shutdown,
// which exports the spans still buffered, is then sd's last step, after
// every component that records spans has stopped (the calls drained at
// shutdown are exported before the process ends). A setting it cannot
// honour (OTLP over gRPC, an unknown exporter) is a *UsageError naming
// the variable.
func Tracing(ctx context.Context, sd *Shutdown, service string, log *slog.Logger) (*tracing.Provider, error) {
	p, err := tracing.FromEnv(ctx, service, discovery.BuildVersion())
	if err != nil {
		return nil, Usagef("%v", err)
	}
	if p == nil {
		return nil, nil
	}
	sd.Defer("tracing", TracingFlushTimeout, p.Shutdown, "exporting the last spans failed")
	if log != nil {
		log.Info("tracing on: exporting spans over OTLP/HTTP", "service", service)
	}
	return p, nil
}
