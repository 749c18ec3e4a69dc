package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/tracing"
)

// TracingFlushTimeout bounds the flush of the spans not yet exported when
// a process stops.
const TracingFlushTimeout = 5 * time.Second

// StartTracing sets up OpenTelemetry tracing from the OTEL_* environment
// (tracing.FromEnv) for service ("toolpool-worker",
// "toolpool-orchestrator"; OTEL_SERVICE_NAME overrides it) and defers its
// flush to sd. Call it before deferring the components: the flush then
// runs after they all stopped, so the spans of the calls drained at
// shutdown are exported before the process ends. It returns nil (off)
// when the environment asks for no traces; its error, a *UsageError,
// names the variable that is wrong.
func StartTracing(ctx context.Context, service string, sd *Shutdown, log *slog.Logger) (*tracing.Provider, error) {
	p, err := tracing.FromEnv(ctx, service, discovery.BuildVersion())
	if err != nil {
		return nil, Usagef("%v", err)
	}
	if p == nil {
		return nil, nil
	}
	log.Info("tracing on: exporting spans over OTLP/HTTP", "service", service)
	sd.Defer("tracing", TracingFlushTimeout, p.Shutdown, "flushing the spans not exported yet")
	return p, nil
}
