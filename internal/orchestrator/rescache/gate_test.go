package rescache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/orchestrator/rescache"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// catalog serves one cacheable tool, search.
type catalog struct{}

func (catalog) Lookup(_ context.Context, name string) (pooltype.ToolInfo, bool) {
	if name != "search" {
		return pooltype.ToolInfo{}, false
	}
	return pooltype.ToolInfo{Name: "search", Version: "v1", Cache: &tools.CachePolicy{TTL: time.Minute}}, true
}

func (catalog) Names(context.Context) []string { return []string{"search"} }

// slowTool is the dispatcher behind the gates: it counts the runs of each
// call and answers them once opened.
type slowTool struct {
	mu   sync.Mutex
	runs int
	open chan struct{}
}

func (s *slowTool) Dispatch(ctx context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	s.mu.Lock()
	s.runs += len(calls)
	s.mu.Unlock()
	select {
	case <-s.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		out[i] = envelope.Result{CallID: c.ID, Tool: c.Name, Content: envelope.Text("found " + string(c.Input))}
	}
	return out, nil
}

func (s *slowTool) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}

// TestGateCoalescesOnTwoReplicas: 50 identical calls at once through the
// gates of two replicas run the tool once; every caller gets the result
// under its own call id; a call after them is a hit on either replica.
func TestGateCoalescesOnTwoReplicas(t *testing.T) {
	srv := natstest.Start(t)
	tool := &slowTool{open: make(chan struct{})}
	gates := make([]*policy.Gate, 2)
	m, err := metrics.NewCache(metrics.NewRegistry(), metrics.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range gates {
		g, err := policy.New(policy.Config{
			Next: tool, Catalog: catalog{}, Cache: replica(t, srv.ClientURL(), rescache.Config{Metrics: m}),
			Metrics: rescache.GateMetrics(m), Logger: natstest.Logger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		gates[i] = g
	}
	ctx := ctxT(t)
	const n = 50
	input := `{"q":"coalesce"}`
	type answer struct {
		res     []envelope.Result
		outcome policy.CacheOutcome
		err     error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var rep policy.Report
			in := input
			if i%3 == 0 {
				in = "{ \"q\" : \"coalesce\" }" // the same call written another way
			}
			res, err := gates[i%2].Dispatch(policy.WithReport(ctx, &rep), fmt.Sprintf("s%d", i),
				[]envelope.ToolUseBlock{{Type: "tool_use", ID: fmt.Sprintf("toolu_%d", i), Name: "search", Input: []byte(in)}})
			answers[i] = answer{res, rep.Cache[0], err}
		})
	}
	natstest.Eventually(t, 10*time.Second, "the first run to start", func() bool { return tool.count() > 0 })
	time.Sleep(200 * time.Millisecond) // the others claim, find the claim and await
	close(tool.open)
	wg.Wait()
	if runs := tool.count(); runs != 1 {
		t.Fatalf("the tool ran %d times; want 1", runs)
	}
	outcomes := map[policy.CacheOutcome]int{}
	for i, a := range answers {
		if a.err != nil || len(a.res) != 1 || a.res[0].IsError || a.res[0].CallID != fmt.Sprintf("toolu_%d", i) {
			t.Fatalf("call %d: %+v, %v", i, a.res, a.err)
		}
		outcomes[a.outcome]++
	}
	if outcomes[policy.CacheMiss] != 1 || outcomes[policy.CacheMiss]+outcomes[policy.CacheCoalesced]+outcomes[policy.CacheHit] != n {
		t.Fatalf("outcomes %v: want one miss, the others coalesced (or hits, when late)", outcomes)
	}
	for _, g := range gates {
		var rep policy.Report
		res, err := g.Dispatch(policy.WithReport(ctx, &rep), "later",
			[]envelope.ToolUseBlock{{Type: "tool_use", ID: "toolu_late", Name: "search", Input: []byte(input)}})
		if err != nil || rep.Cache[0] != policy.CacheHit || res[0].CallID != "toolu_late" {
			t.Fatalf("a later call: %v %+v, %v", rep.Cache, res, err)
		}
	}
	if runs := tool.count(); runs != 1 {
		t.Fatalf("the tool ran %d times; want 1", runs)
	}
	tot := m.Totals()
	if tot.Misses != 1 || tot.Hits+tot.Coalesced != n+1 || tot.Stored != 1 || tot.Errors != 0 {
		t.Fatalf("metrics totals %+v: want 1 miss, %d hits or coalesced, 1 stored", tot, n+1)
	}
}
