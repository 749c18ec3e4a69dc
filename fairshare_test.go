package toolpool_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/promtest"
)

// startWorkers starts a Server of p's registry with workers workers of
// concurrency slots each, stopped when the test ends.
func (p *pool) startWorkers(t *testing.T, workers, concurrency int) {
	t.Helper()
	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: p.reg, Workers: workers,
		Concurrency: concurrency, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
}

// TestServerAnnouncesItsSlots: each worker of a Server announces its
// concurrency as its slots, so the live catalog knows the fleet's.
func TestServerAnnouncesItsSlots(t *testing.T) {
	t.Parallel()
	p := setup(t)
	p.startWorkers(t, 2, 3)
	j, err := js.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: natstest.Logger(t)})
	if err == nil {
		err = live.Start(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Stop(context.Background()) })
	natstest.Eventually(t, time.Minute, "both workers announced", func() bool { return len(live.Workers(t.Context(), "hold")) == 2 })
	if info, ok := live.Lookup(t.Context(), "hold"); !ok || info.Slots != 6 {
		t.Errorf("Lookup(hold) = %+v, %v; want 6 slots (2 workers of 3)", info, ok)
	}
}

// TestSchedStatsEndToEnd: a real Orchestrator holds the calls beyond its
// window for a saturated tool, and both `status --by-key` (ops.SchedStats
// over NATS) and the metrics show them per tool and tenant.
func TestSchedStatsEndToEnd(t *testing.T) {
	t.Parallel()
	p := setup(t)
	p.startWorkers(t, 1, 2)
	keys, err := toolpool.ParseAPIKeys([]byte(`[{tenant: team-a, key: a-0123456789abcdef, weight: 2}]`), "keys")
	if err != nil {
		t.Fatal(err)
	}
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, APIKeys: keys,
		Instance: "orch-e2e", Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orch.Stop(context.Background()) })
	// The worker's announcement (its 2 slots) may come after the
	// orchestrator's start under load (a put that timed out is retried at
	// the next heartbeat): until the orchestrator knows hold, its calls
	// would be answered at once and none would ever be held.
	natstest.Eventually(t, time.Minute, "the orchestrator to know hold", func() bool {
		return slices.ContainsFunc(orch.Definitions(t.Context()), func(d toolpool.ToolDefinition) bool { return d.Name == "hold" })
	})

	// One worker of 2 slots: the window is 2 and its margin (at least 4).
	// Ten calls of team-a: 6 are published, 4 wait at the orchestrator.
	ctx := toolpool.WithWeight(toolpool.WithTenant(t.Context(), "team-a"), 2)
	calls := make([]toolpool.ToolUse, 10)
	for i := range calls {
		calls[i] = toolpool.ToolUse{ID: "call-" + strconv.Itoa(i), Name: "hold", Input: json.RawMessage(`{}`)}
	}
	done := make(chan error, 1)
	go func() {
		_, err := orch.Dispatch(ctx, "s", calls)
		done <- err
	}()

	var st ops.SchedStatus
	natstest.Eventually(t, time.Minute, "4 calls held at the orchestrator", func() bool {
		snaps, err := ops.SchedStats(t.Context(), p.nc, ops.SchedStatsOptions{})
		if err != nil {
			return false
		}
		st = ops.SumSchedStats(snaps)
		return len(st.Tools) == 1 && st.Tools[0].Waiting == 4
	})
	hold := st.Tools[0]
	if !slices.Equal(st.Orchestrators, []string{"orch-e2e"}) || hold.Tool != "hold" || hold.Slots != 2 || hold.InFlight != 6 ||
		len(hold.Keys) != 1 || hold.Keys[0].Tenant != "team-a" || hold.Keys[0].Weight != 2 || hold.Keys[0].Waiting != 4 {
		t.Errorf("status --by-key: %+v", st)
	}

	// Another orchestrator's console shows the fleet's held calls, though
	// its own scheduler holds none: it sums every orchestrator's snapshot.
	other, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, Console: true, ConsoleLoopback: true,
		Instance: "orch-console", NoPoisonWatcher: true, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop(context.Background()) })
	ui := httptest.NewServer(other.Handler())
	defer ui.Close()
	var lastRow string // what the console showed last, for a failure
	defer func() {
		if t.Failed() {
			t.Logf("the console's last hold row (or page): %s", lastRow)
		}
	}()
	natstest.Eventually(t, time.Minute, "the other orchestrator's console to show 4 calls of hold waiting", func() bool {
		resp, err := http.Get(ui.URL + "/ui/overview.frag")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		row := string(body)
		lastRow = row
		if i := strings.Index(row, `<tr data-tool="hold">`); i >= 0 {
			row = row[i:]
			if j := strings.Index(row, "</tr>"); j >= 0 {
				row = row[:j]
			}
			lastRow = row
			return strings.Contains(row, ">4 (0)<")
		}
		return false
	})

	hs := httptest.NewServer(orch.Handler())
	defer hs.Close()
	f := promtest.Parse(t, promtest.Scrape(t, hs.URL+"/metrics"))
	for name, want := range map[string]float64{
		"toolpool_sched_waiting_calls":   4,
		"toolpool_sched_in_flight_calls": 6,
	} {
		if got := f.Value(name, "tool", "hold", "tenant", "team-a"); got != want {
			t.Errorf("%s{tool=hold,tenant=team-a} = %v, want %v", name, got, want)
		}
	}
	if got := f.Value("toolpool_sched_slots", "tool", "hold"); got != 2 {
		t.Errorf("toolpool_sched_slots{tool=hold} = %v, want 2", got)
	}

	close(p.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	snaps, err := ops.SchedStats(t.Context(), p.nc, ops.SchedStatsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k := ops.SumSchedStats(snaps).Tools[0].Keys[0]; k.Served != 10 || k.Waiting != 0 || k.InFlight != 0 {
		t.Errorf("after the calls: %+v", k)
	}
}
