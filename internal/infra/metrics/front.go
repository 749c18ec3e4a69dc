package metrics

import "github.com/prometheus/client_golang/prometheus"

// Front counts what the orchestrator's HTTP front door (package httpapi)
// refuses and the tool calls of each tenant. It implements
// httpapi.Metrics. Tenants come from the API key file and refusal reasons
// and outcomes are fixed sets, so the labels stay bounded.
type Front struct {
	refused *prometheus.CounterVec
	calls   *prometheus.CounterVec
}

// NewFront creates the front door's metrics and registers them with reg.
func NewFront(reg prometheus.Registerer) (*Front, error) {
	m := &Front{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "http", Name: "refused_total",
			Help: "HTTP requests (or connections) refused before reaching a tool, by reason: unauthorized, content_type, host, origin, busy, connections, draining.",
		}, []string{"reason"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "tenant", Name: "tool_calls_total",
			Help: "Tool calls posted to the HTTP API, by tenant (the API key's; empty without keys) and outcome: dispatched, not_allowed (a tool the key may not call), saturated (refused by admission control, 429).",
		}, []string{"tenant", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.refused, m.calls} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Refused counts a refused request.
func (m *Front) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// ToolCalls counts n tool calls of tenant by outcome.
func (m *Front) ToolCalls(tenant, outcome string, n int) {
	if n > 0 {
		m.calls.WithLabelValues(tenant, outcome).Add(float64(n))
	}
}
