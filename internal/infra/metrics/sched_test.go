package metrics

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/internal/promtest"
)

// snapshots is a settable snapshot source.
type snapshots struct {
	mu   sync.Mutex
	snap sched.Snapshot
}

func (s *snapshots) set(snap sched.Snapshot) { s.mu.Lock(); s.snap = snap; s.mu.Unlock() }
func (s *snapshots) get() sched.Snapshot     { s.mu.Lock(); defer s.mu.Unlock(); return s.snap }

// TestSchedCollectorBoundsTenants: configured tenants are labelled by
// name, every other one (and the snapshot's own rest) is summed as
// "other", keys finer than the tenant are summed into it, and the served
// counter only grows.
func TestSchedCollectorBoundsTenants(t *testing.T) {
	t.Parallel()
	src := &snapshots{}
	keys := []sched.KeyStats{
		{Key: "team-a", Tenant: "team-a", Weight: 2, Waiting: 5, InFlight: 3, Served: 10},
		{Key: "team-b/s1", Tenant: "team-b", Waiting: 1, Limited: 2, InFlight: 1, Served: 4},
		{Key: "team-b/s2", Tenant: "team-b", Waiting: 2, InFlight: 1, Served: 6},
		{Key: sched.OtherKey, Tenant: "", Waiting: 7, InFlight: 2, Served: 100},
	}
	for i := range 50 { // tenants no API key names: one label, other
		id := "stranger-" + strconv.Itoa(i)
		keys = append(keys, sched.KeyStats{Key: id, Tenant: id, Waiting: 1, Served: 1})
	}
	src.set(sched.Snapshot{Instance: "o1", At: time.Now(), Replicas: 2, Tools: []sched.ToolStats{{
		Tool: "review", Slots: 64, Window: 80, InFlight: 7, Waiting: 65, Limited: 2,
		Limits: sched.Limits{Concurrency: 4, Rate: 25, Per: time.Second, Burst: 25},
		Keys:   keys,
	}}})
	reg := NewRegistry()
	reg.MustRegister(NewSchedCollector(src.get, SchedOptions{Tenants: []string{"team-a", "team-b", "team-c"}}))

	f, text := gather(t, reg)
	promtest.CheckMetrics(t, text)
	if got := f.LabelValues("toolpool_sched_waiting_calls", "tenant"); !slices.Equal(got, []string{"other", "team-a", "team-b"}) {
		t.Errorf("tenant labels %v, want other, team-a, team-b", got)
	}
	for _, c := range []struct {
		name, tenant string
		want         float64
	}{
		{"toolpool_sched_waiting_calls", "team-a", 5},
		{"toolpool_sched_waiting_calls", "team-b", 3},
		{"toolpool_sched_waiting_calls", "other", 57}, // 7 + 50 strangers
		{"toolpool_sched_limited_calls", "team-b", 2},
		{"toolpool_sched_in_flight_calls", "team-a", 3},
		{"toolpool_sched_in_flight_calls", "other", 2},
		{"toolpool_sched_served_calls_total", "team-b", 10},
		{"toolpool_sched_served_calls_total", "other", 150},
	} {
		if got := f.Value(c.name, "tool", "review", "tenant", c.tenant); got != c.want {
			t.Errorf("%s{tenant=%q} = %v, want %v", c.name, c.tenant, got, c.want)
		}
	}
	for name, want := range map[string]float64{
		"toolpool_sched_slots": 64, "toolpool_sched_window_calls": 80, "toolpool_sched_key_concurrency_limit": 4,
		"toolpool_sched_key_rate_limit_per_second": 25, "toolpool_sched_key_rate_burst": 25,
	} {
		if got := f.Value(name, "tool", "review"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := f.Value("toolpool_sched_replicas"); got != 2 {
		t.Errorf("replicas %v", got)
	}

	// Next scrape: team-a served 5 more; team-b's s2 was forgotten (idle)
	// and s1 is gone too; the strangers are gone. The counters keep what
	// they had and grow by the new calls only.
	src.set(sched.Snapshot{Instance: "o1", Replicas: 1, Tools: []sched.ToolStats{{
		Tool: "review", Slots: 64, Window: 80,
		Keys: []sched.KeyStats{
			{Key: "team-a", Tenant: "team-a", Served: 15},
			{Key: "team-b/s2", Tenant: "team-b", Served: 2}, // taken up again: counts from zero
		},
	}}})
	f, _ = gather(t, reg)
	for tenant, want := range map[string]float64{"team-a": 15, "team-b": 12, "other": 150} {
		if got := f.Value("toolpool_sched_served_calls_total", "tool", "review", "tenant", tenant); got != want {
			t.Errorf("served{tenant=%q} after the keys changed = %v, want %v", tenant, got, want)
		}
	}
	if f.Has("toolpool_sched_key_concurrency_limit") {
		t.Error("a tool without per-key limits shows a limit")
	}
}

// TestSchedCollectorBoundsTools: tools past MaxTools share one label.
func TestSchedCollectorBoundsTools(t *testing.T) {
	t.Parallel()
	var tools []sched.ToolStats
	for i := range 5 {
		tools = append(tools, sched.ToolStats{Tool: "t" + strconv.Itoa(i), Slots: 8,
			Keys: []sched.KeyStats{{Key: "a", Tenant: "a", Waiting: 1, Served: 1}}})
	}
	reg := NewRegistry()
	reg.MustRegister(NewSchedCollector(func() sched.Snapshot { return sched.Snapshot{Tools: tools} }, SchedOptions{MaxTools: 2}))
	f, _ := gather(t, reg)
	if got := f.LabelValues("toolpool_sched_slots", "tool"); !slices.Equal(got, []string{UnknownTool, "t0", "t1"}) {
		t.Errorf("tool labels %v", got)
	}
	if got := f.Value("toolpool_sched_waiting_calls", "tool", UnknownTool, "tenant", "other"); got != 3 {
		t.Errorf("waiting of the tools past the bound: %v, want 3", got)
	}
}
