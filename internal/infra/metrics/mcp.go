package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// MCP counts the sessions of a worker's MCP servers (package mcpback). It
// implements mcpback.Metrics. Servers are the catalog's mcp entries, so
// the labels stay bounded.
type MCP struct {
	up           *prometheus.GaugeVec
	restarts     *prometheus.CounterVec
	startFailure *prometheus.CounterVec
}

// NewMCP creates the MCP backend's metrics and registers them with reg.
func NewMCP(reg prometheus.Registerer) (*MCP, error) {
	const sub = "mcp"
	m := &MCP{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "sessions_up",
			Help: "Sessions (stdio: processes) to each MCP server that are connected now.",
		}, []string{"server"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "session_restarts_total",
			Help: "Sessions to each MCP server connected again after one died (a stdio server that exited, an HTTP server that dropped the session).",
		}, []string{"server"}),
		startFailure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "start_failures_total",
			Help: "MCP servers that did not start with the worker: their tools are not served (see the log and /readyz).",
		}, []string{"server"}),
	}
	for _, c := range []prometheus.Collector{m.up, m.restarts, m.startFailure} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SessionUp counts a session that connected.
func (m *MCP) SessionUp(server string, restart bool) {
	m.up.WithLabelValues(server).Inc()
	if restart {
		m.restarts.WithLabelValues(server).Inc()
	}
}

// SessionDown counts a session that was up and ended.
func (m *MCP) SessionDown(server string) { m.up.WithLabelValues(server).Dec() }

// StartFailed counts a server that did not start.
func (m *MCP) StartFailed(server string) {
	m.startFailure.WithLabelValues(server).Inc()
	m.up.WithLabelValues(server) // at zero: the server has no session
}
