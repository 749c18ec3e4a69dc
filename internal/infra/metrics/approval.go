package metrics

import "github.com/prometheus/client_golang/prometheus"

// Approvals counts the calls an orchestrator held for a person's approval
// and the decisions it made or timed out. It implements approval.Metrics.
// The outcomes are a fixed set (approved, denied, timed_out), so the
// labels stay bounded; nothing is labelled per tool, tenant or call.
type Approvals struct {
	held    prometheus.Counter
	decided *prometheus.CounterVec
	pending prometheus.Gauge
}

// approvalOutcomes are Approvals.Decided's labels, exported at 0 from the
// start.
var approvalOutcomes = []string{"approved", "denied", "timed_out"}

// NewApprovals creates the approval metrics and registers them with reg.
func NewApprovals(reg prometheus.Registerer) (*Approvals, error) {
	m := &Approvals{
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "approvals", Name: "held_total",
			Help: "Tool calls this orchestrator held for a person's approval (a call sent again with its approval already recorded is not counted again).",
		}),
		decided: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "approvals", Name: "decided_total",
			Help: "Approvals this process decided, by outcome: approved, denied, or timed_out (no decision within the tool's timeout; counted by the replica that wrote it).",
		}, []string{"outcome"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "approvals", Name: "pending",
			Help: "Approvals waiting for a decision, fleet-wide (the toolpool_approvals bucket, as this replica's watch sees it).",
		}),
	}
	for _, o := range approvalOutcomes {
		m.decided.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{m.held, m.decided, m.pending} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Held counts a call newly held.
func (m *Approvals) Held() { m.held.Inc() }

// Decided counts a decision by its outcome; an outcome outside the set is
// not counted.
func (m *Approvals) Decided(outcome string) {
	for _, o := range approvalOutcomes {
		if o == outcome {
			m.decided.WithLabelValues(o).Inc()
			return
		}
	}
}

// Pending sets the number of pending approvals.
func (m *Approvals) Pending(n int) { m.pending.Set(float64(n)) }
