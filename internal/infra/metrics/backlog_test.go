package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/promtest"
)

// TestBacklogCollector: per tool the oldest age, the drain estimate (-1
// when not draining, 0 when empty) and one state series set to 1.
func TestBacklogCollector(t *testing.T) {
	t.Parallel()
	read := func(context.Context) ([]BacklogTool, error) {
		return []BacklogTool{
			{Tool: "echo", State: "ok", Draining: true},
			{Tool: "review", State: "backing_up", OldestAge: 45 * time.Second, Draining: true, Drain: 90 * time.Second},
			{Tool: "orphan", State: "stalled", OldestAge: 2 * time.Minute},
		}, errors.New("one tool's oldest call could not be read")
	}
	reg := NewRegistry()
	reg.MustRegister(NewBacklogCollector(read, BacklogOptions{States: []string{"ok", "backing_up", "stalled"}}))
	f, text := gather(t, reg)
	promtest.CheckMetrics(t, text)
	for _, c := range []struct {
		name  string
		label []string
		want  float64
	}{
		{"toolpool_backlog_oldest_age_seconds", []string{"tool", "review"}, 45},
		{"toolpool_backlog_oldest_age_seconds", []string{"tool", "echo"}, 0},
		{"toolpool_backlog_drain_estimate_seconds", []string{"tool", "review"}, 90},
		{"toolpool_backlog_drain_estimate_seconds", []string{"tool", "echo"}, 0},
		{"toolpool_backlog_drain_estimate_seconds", []string{"tool", "orphan"}, -1},
		{"toolpool_backlog_state", []string{"tool", "orphan", "state", "stalled"}, 1},
		{"toolpool_backlog_state", []string{"tool", "orphan", "state", "ok"}, 0},
		{"toolpool_backlog_state", []string{"tool", "review", "state", "backing_up"}, 1},
		{"toolpool_backlog_state", []string{"tool", "echo", "state", "ok"}, 1},
	} {
		if got := f.Value(c.name, c.label...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.label, got, c.want)
		}
	}
}
