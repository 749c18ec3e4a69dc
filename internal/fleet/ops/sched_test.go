package ops_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/jetstream"
)

// twoReplicas are the snapshots of two orchestrators sharing the limits of
// "review" (4 calls at once and 25/s per key each: 8 and 50/s in all).
func twoReplicas() []sched.Snapshot {
	limits := sched.Limits{Concurrency: 4, Rate: 25, Per: time.Second, Burst: 25}
	return []sched.Snapshot{
		{Instance: "orch-b", Replicas: 2, Tools: []sched.ToolStats{
			{Tool: "review", Slots: 64, Window: 80, InFlight: 40, Waiting: 903, Limited: 3, Limits: limits, Keys: []sched.KeyStats{
				{Key: "team-a", Tenant: "team-a", Weight: 1, InFlight: 38, Waiting: 900, Served: 1000, PerSecond: 400,
					ByPriority: map[string]int{"normal": 900}},
				{Key: "team-b", Tenant: "team-b", Weight: 3, InFlight: 2, Waiting: 3, Limited: 3, Served: 20, PerSecond: 10,
					ByPriority: map[string]int{"high": 3}},
			}},
		}},
		{Instance: "orch-a", Replicas: 2, Tools: []sched.ToolStats{
			{Tool: "review", Slots: 64, Window: 80, InFlight: 30, Waiting: 100, Limits: limits, Keys: []sched.KeyStats{
				{Key: "team-a", Tenant: "team-a", Weight: 1, InFlight: 29, Waiting: 100, Served: 500, PerSecond: 300,
					ByPriority: map[string]int{"normal": 99, "low": 1}},
				{Key: sched.OtherKey, InFlight: 1, Served: 7, PerSecond: 1},
			}},
			{Tool: "echo", Keys: []sched.KeyStats{{Key: "team-b", Tenant: "team-b", Weight: 3, Served: 5, PerSecond: 0.5}}},
		}},
	}
}

// TestSchedStatsSumsTheReplicas: SchedStats collects every orchestrator's
// snapshot from a real NATS server; SumSchedStats adds them up per tool
// and key, and the limits as the fleet applies them.
func TestSchedStatsSumsTheReplicas(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	// orch-a answers twice (two responders under its id): it is summed once.
	for _, s := range append(twoReplicas(), twoReplicas()[0]) {
		natstest.RespondJSON(t, srv.ClientURL(), jetstream.SchedStatsSubject, s)
	}
	nc := natstest.Connect(t, srv.ClientURL())
	snaps, err := ops.SchedStats(t.Context(), nc, ops.SchedStatsOptions{Window: 10 * time.Second, Idle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 || snaps[0].Instance != "orch-a" || snaps[1].Instance != "orch-b" {
		t.Fatalf("snapshots %+v", snaps)
	}
	st := ops.SumSchedStats(snaps)
	if len(st.Orchestrators) != 2 || len(st.Tools) != 2 || st.Tools[0].Tool != "echo" || st.Tools[1].Tool != "review" {
		t.Fatalf("status %+v", st)
	}
	r := st.Tools[1]
	if r.Slots != 64 || r.Window != 160 || r.InFlight != 70 || r.Waiting != 1003 || r.Limited != 3 {
		t.Errorf("review totals %+v", r)
	}
	if want := (sched.Limits{Concurrency: 8, Rate: 50, Per: time.Second, Burst: 50}); r.Limits != want {
		t.Errorf("review limits %+v, want %+v", r.Limits, want)
	}
	if len(r.Keys) != 3 || r.Keys[0].Key != "team-a" || r.Keys[1].Key != "team-b" || r.Keys[2].Key != sched.OtherKey {
		t.Fatalf("review keys %+v", r.Keys)
	}
	a, b := r.Keys[0], r.Keys[1]
	if a.InFlight != 67 || a.Waiting != 1000 || a.Served != 1500 || a.PerSecond != 700 ||
		a.ByPriority["normal"] != 999 || a.ByPriority["low"] != 1 {
		t.Errorf("team-a %+v", a)
	}
	if b.Weight != 3 || b.Limited != 3 || b.PerSecond != 10 || b.ByPriority["high"] != 3 {
		t.Errorf("team-b %+v", b)
	}
}

// TestSchedStatsNoOrchestrator: no one answers, and SchedStats says so
// at once (the server's "no responders").
func TestSchedStatsNoOrchestrator(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.ClientURL())
	if _, err := ops.SchedStats(t.Context(), nc, ops.SchedStatsOptions{}); !errors.Is(err, ops.ErrNoOrchestrator) {
		t.Errorf("SchedStats with no orchestrator: %v", err)
	}
}
