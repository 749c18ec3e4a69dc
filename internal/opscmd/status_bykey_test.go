package opscmd

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/jetstream"
)

// TestStatusByKey: two orchestrators' snapshots summed per tool and key,
// as a table and as JSON; none answering is exit 1 with a message.
func TestStatusByKey(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	url := srv.ClientURL()
	if code, _, errOut := orch(t, "status", "--by-key", "--nats-url", url); code != 1 ||
		!strings.Contains(errOut, "no orchestrator answered within 300ms: none is running on this NATS server, or they run a version without fair shares") {
		t.Errorf("no orchestrator: exit %d: %s", code, errOut)
	}

	limits := sched.Limits{Concurrency: 4, Rate: 25, Per: time.Second, Burst: 25}
	natstest.RespondJSON(t, url, jetstream.SchedStatsSubject, sched.Snapshot{Instance: "orch-1", Replicas: 2, Tools: []sched.ToolStats{{
		Tool: "review", Slots: 64, Window: 80, InFlight: 40, Waiting: 903, Limited: 3, Limits: limits,
		Keys: []sched.KeyStats{
			{Key: "team-a", Tenant: "team-a", Weight: 1, InFlight: 38, Waiting: 900, Served: 1000, PerSecond: 400},
			{Key: "team-b", Tenant: "team-b", Weight: 3, InFlight: 2, Waiting: 3, Limited: 3, Served: 20, PerSecond: 10.04, ByPriority: map[string]int{"high": 3}},
		},
	}}})
	natstest.RespondJSON(t, url, jetstream.SchedStatsSubject, sched.Snapshot{Instance: "orch-2", Replicas: 2, Tools: []sched.ToolStats{{
		Tool: "review", Slots: 64, Window: 80, InFlight: 30, Waiting: 100, Limits: limits,
		Keys: []sched.KeyStats{{Key: "team-a", Tenant: "team-a", Weight: 1, InFlight: 29, Waiting: 100, Served: 500, PerSecond: 300}},
	}}})

	code, out, errOut := orch(t, "status", "--by-key", "--nats-url", url)
	if code != 0 {
		t.Fatalf("status --by-key: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"2", "orchestrator(s):", "orch-1,", "orch-2"},
		{"TOOL", "KEY", "TENANT", "WEIGHT", "WAITING", "LIMITED", "IN", "FLIGHT", "SERVED/S", "LIMITS"},
		{"review", "*", "-", "-", "1003", "3", "70", "710", "slots", "64,", "window", "160"},
		{"review", "team-a", "team-a", "1", "1000", "0", "67", "700", "cap", "8,", "50/s", "burst", "50"},
		{"review", "team-b", "team-b", "3", "3", "(3", "high)", "3", "2", "10", "cap", "8,", "50/s", "burst", "50"},
	}
	if len(lines) != len(want) {
		t.Fatalf("status --by-key:\n%s", out)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d: %q, want %q\n%s", i, got, w, out)
		}
	}

	code, out, errOut = orch(t, "status", "--by-key", "--json", "--nats-url", url)
	if code != 0 {
		t.Fatalf("status --by-key --json: exit %d: %s", code, errOut)
	}
	var st ops.SchedStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(st.Orchestrators) != 2 || len(st.Tools) != 1 || st.Tools[0].InFlight != 70 || len(st.Tools[0].Keys) != 2 ||
		st.Tools[0].Keys[0].Served != 1500 || st.Tools[0].Limits.Concurrency != 8 {
		t.Errorf("status --by-key --json: %+v", st)
	}
}
