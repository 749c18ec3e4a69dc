package metrics_test

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/promtest"
)

func TestBudgetLabelsAreBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := metrics.NewBudget(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Spent("acme.daily", 7, 100)
	m.Refused("acme.daily")
	m.Refused("acme.daily")
	for i := range 100 {
		m.Spent("b"+strconv.Itoa(i), 1, 2)
		m.Refused("b" + strconv.Itoa(i))
	}
	f := promtest.Gather(t, reg)
	if got := f.Value("toolpool_budget_spent", "budget", "acme.daily"); got != 7 {
		t.Errorf("spent = %v", got)
	}
	if got := f.Value("toolpool_budget_limit", "budget", "acme.daily"); got != 100 {
		t.Errorf("limit = %v", got)
	}
	if got := f.Value("toolpool_budget_refused_total", "budget", "acme.daily"); got != 2 {
		t.Errorf("refused = %v", got)
	}
	// 63 more names are labels; the other 37 budgets' refusals are "other"
	if got := f.Value("toolpool_budget_refused_total", "budget", "other"); got != 37 {
		t.Errorf("refused{budget=other} = %v, want 37", got)
	}
	if n := len(f.LabelValues("toolpool_budget_spent", "budget")); n != metrics.MaxBudgetsDefault {
		t.Errorf("%d spent series, want %d", n, metrics.MaxBudgetsDefault)
	}
	if n := len(f.LabelValues("toolpool_budget_refused_total", "budget")); n != metrics.MaxBudgetsDefault+1 {
		t.Errorf("%d refused series, want %d", n, metrics.MaxBudgetsDefault+1)
	}
}
