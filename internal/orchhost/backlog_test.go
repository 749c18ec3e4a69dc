package orchhost_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/promtest"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// Two orchestrators sample the pool: the history sums the results each
// one's callers got, slot by slot, and the backlog's metrics are exported.
func TestBacklogHistoryOfTwoReplicas(t *testing.T) {
	t.Parallel()
	srv, nc, _ := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	pooltest.StartServer(t, srv.ClientURL(), reg)
	orch := func(instance string) *pooltest.Orchestrator {
		c := nc
		if instance == "orch-b" {
			c = natstest.Connect(t, srv.ClientURL())
		}
		return pooltest.StartOrchestrator(t, c, discovery.RegistryCatalog(reg), func(cfg *pooltest.OrchestratorConfig) {
			cfg.Dispatch.Instance = instance
			cfg.Backlog.SampleEvery = time.Second
		})
	}
	a, b := orch("orch-a"), orch("orch-b")
	calls := 0
	for i, o := range []*pooltest.Orchestrator{a, b, a, b, a} {
		res, err := o.Dispatch(t.Context(), "", []envelope.ToolUseBlock{{Type: "tool_use", ID: fmt.Sprintf("toolu_hist_%d", i),
			Name: "echo", Input: json.RawMessage(fmt.Sprintf(`{"text":"call %d"}`, i))}})
		if err != nil || res[0].IsError {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
		calls++
	}
	natstest.Eventually(t, 30*time.Second, "every call in the history", func() bool {
		samples, err := b.Backlog().Range(t.Context(), time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		sum, both := 0.0, false
		for _, s := range samples {
			sum += s.Pool.CallsPerSec
			both = both || len(s.Instances) == 2
			for _, ts := range s.Tools {
				if ts.Tool == "echo" && ts.CallsPerSec > 0 && (ts.P50 <= 0 || ts.State != "ok") {
					t.Errorf("echo in %v: %+v", s.At, ts)
				}
			}
		}
		return sum == float64(calls) && both
	})
	f := promtest.Gather(t, a.Metrics())
	if got := f.Value("toolpool_backlog_state", "tool", "echo", "state", "ok"); got != 1 {
		t.Errorf("toolpool_backlog_state{tool=echo,state=ok} = %v", got)
	}
	if got := f.Value("toolpool_backlog_drain_estimate_seconds", "tool", "echo"); got != 0 {
		t.Errorf("drain estimate of an empty queue = %v, want 0", got)
	}
}
