package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpool/toolpool/internal/pooltype"
)

// MaxBudgetsDefault caps the distinct budget labels of Budget.
const MaxBudgetsDefault = 64

// Budget is the Prometheus implementation of budget.Metrics for an
// orchestrator: per budget, its spending in the current period as this
// replica last saw it (fleet-wide), its limit, and the calls it refused.
// Budget names are operator-defined: the first MaxBudgetsDefault names
// seen are labels; the refusals of any other budget are counted under
// pooltype.OtherKey and its gauges are not exported. It is safe for
// concurrent use.
type Budget struct {
	spent, limit *prometheus.GaugeVec
	refused      *prometheus.CounterVec

	mu    sync.Mutex
	names map[string]bool
	max   int
}

// NewBudget creates the budget metrics and registers them with reg.
func NewBudget(reg prometheus.Registerer) (*Budget, error) {
	const sub = "budget"
	m := &Budget{
		spent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "spent",
			Help: "Units (calls, or cost units) spent of the budget in its current period, fleet-wide, as this orchestrator last saw them.",
		}, []string{"budget"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "limit",
			Help: "Units the budget allows per period.",
		}, []string{"budget"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "refused_total",
			Help: "Calls this orchestrator answered with budget_exhausted instead of publishing them, by budget.",
		}, []string{"budget"}),
		names: map[string]bool{},
		max:   MaxBudgetsDefault,
	}
	for _, c := range []prometheus.Collector{m.spent, m.limit, m.refused} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// label is the label of the budget name: itself while fewer than max
// names were seen, else "".
func (m *Budget) label(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names[name] {
		return name
	}
	if len(m.names) >= m.max || name == pooltype.OtherKey {
		return ""
	}
	m.names[name] = true
	return name
}

// Spent sets the budget's spending and limit.
func (m *Budget) Spent(budget string, spent, limit int64) {
	l := m.label(budget)
	if l == "" {
		return
	}
	m.spent.WithLabelValues(l).Set(float64(spent))
	m.limit.WithLabelValues(l).Set(float64(limit))
}

// Refused counts a call the budget refused.
func (m *Budget) Refused(budget string) {
	l := m.label(budget)
	if l == "" {
		l = pooltype.OtherKey
	}
	m.refused.WithLabelValues(l).Inc()
}
