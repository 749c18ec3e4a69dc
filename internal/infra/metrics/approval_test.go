package metrics

import (
	"testing"

	"github.com/toolpool/toolpool/internal/promtest"
)

// TestApprovals: held calls, decisions by outcome (an unknown outcome is
// not a new label) and the pending gauge, in a scrape promtool accepts.
func TestApprovals(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	m, err := NewApprovals(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Held()
	m.Held()
	m.Held()
	m.Decided("approved")
	m.Decided("denied")
	m.Decided("denied")
	m.Decided("something else")
	m.Pending(4)
	m.Pending(1)
	fams, text := gather(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"toolpool_approvals_held_total", nil, 3},
		{"toolpool_approvals_decided_total", []string{"outcome", "approved"}, 1},
		{"toolpool_approvals_decided_total", []string{"outcome", "denied"}, 2},
		{"toolpool_approvals_decided_total", []string{"outcome", "timed_out"}, 0},
		{"toolpool_approvals_decided_total", nil, 3},
		{"toolpool_approvals_pending", nil, 1},
	} {
		if got := fams.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	promtest.CheckMetrics(t, text)
}
