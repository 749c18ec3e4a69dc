package toolpool

import (
	"context"
	"net/http"

	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/metrics"
)

// Check is one condition of readiness, run by the /readyz of a Handler.
type Check struct {
	// Name names the check in /readyz's answer.
	Name string
	// Func returns nil when the condition holds, and otherwise an error
	// whose text says what is missing; the text is served to whoever
	// probes, so it must hold no secret.
	Func func(ctx context.Context) error
	// Detail marks a check that is reported but does not make /readyz
	// fail: the status of a part the process serves without (an MCP
	// server of a catalog, retried in the background).
	Detail bool
}

// healthChecks are cs as package health's.
func healthChecks(cs []Check) []health.Check {
	if cs == nil {
		return nil
	}
	out := make([]health.Check, len(cs))
	for i, c := range cs {
		out[i] = health.Check{Name: c.Name, Func: c.Func, Detail: c.Detail}
	}
	return out
}

// rootChecks are package health's cs as Checks.
func rootChecks(cs []health.Check) []Check {
	out := make([]Check, len(cs))
	for i, c := range cs {
		out[i] = Check{Name: c.Name, Func: c.Func, Detail: c.Detail}
	}
	return out
}

// MetricsRegistry holds the Prometheus metrics of the Servers and
// Orchestrators given it (ServerConfig.Metrics, OrchestratorConfig.Metrics):
// one registry for the components of one process, served by their
// Handlers' GET /metrics or by Handler.
type MetricsRegistry struct {
	reg *metrics.Registry
}

// NewMetricsRegistry returns an empty registry, with the Go runtime's and
// the process's metrics.
func NewMetricsRegistry() *MetricsRegistry { return &MetricsRegistry{reg: metrics.NewRegistry()} }

// Handler serves the registry's metrics in the Prometheus text format.
func (r *MetricsRegistry) Handler() http.Handler { return metrics.Handler(r.reg) }
