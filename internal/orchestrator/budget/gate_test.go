package budget_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// oneTool is a catalog of one tool of cost 3.
type oneTool struct{}

func (oneTool) Lookup(_ context.Context, name string) (pooltype.ToolInfo, bool) {
	return pooltype.ToolInfo{Name: name, Cost: 3}, name == "search"
}
func (oneTool) Names(context.Context) []string { return []string{"search"} }

// runner answers every call with a success and counts them.
type runner struct{ ran atomic.Int64 }

func (r *runner) Dispatch(_ context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		r.ran.Add(1)
		out[i] = envelope.Result{V: envelope.Version, CallID: c.ID, Tool: c.Name, Content: envelope.Text("ok")}
	}
	return out, nil
}

// Two gates, each over a real Store of its own connection (two
// orchestrators), share a budget of 30 cost units: calls of cost 3 from
// both, concurrently, run exactly 10 times; the model reads the budget's
// words; a turn refused as a whole is an *ExhaustedError.
func TestGatesShareABudget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a, b := f.replica(t, nil), f.replica(t, nil)
	f.set(t, budget.Def{Name: "acme-units", Tenant: "acme", Period: budget.Day, Limit: 30, Cost: true, Soft: 0.5}, a, b)
	next := &runner{}
	var gates []*policy.Gate
	for _, r := range []*replica{a, b} {
		g, err := policy.New(policy.Config{Next: next, Catalog: oneTool{}, Budgets: r.Store, Logger: natstest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		gates = append(gates, g)
	}
	ctx := dispatch.WithTenant(t.Context(), "acme")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused []envelope.Result
		noted   atomic.Int64
	)
	for i := range 40 {
		wg.Go(func() {
			id := "toolu_" + strconv.Itoa(i)
			res, err := gates[i%2].Dispatch(ctx, "s"+id, []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: "search", Input: json.RawMessage(`{}`)}})
			var ex *policy.ExhaustedError
			switch {
			case errors.As(err, &ex):
				mu.Lock()
				refused = append(refused, ex.Results...)
				mu.Unlock()
			case err != nil:
				t.Error(err)
			case len(res) == 1 && !res[0].IsError:
				if strings.Contains(res[0].Content[len(res[0].Content)-1].Text, `Note: the budget "acme-units"`) {
					noted.Add(1)
				}
			default:
				t.Errorf("result %+v", res)
			}
		})
	}
	wg.Wait()
	if n := next.ran.Load(); n != 10 || len(refused) != 30 {
		t.Fatalf("ran %d, refused %d; want exactly 10 calls of 3 units under 30, and 30 refused", n, len(refused))
	}
	r := refused[0]
	if r.Code != classify.CodeBudgetExhausted || !r.IsError || !strings.Contains(r.Content[0].Text, `the budget "acme-units" allows 30 cost units per day`) {
		t.Errorf("refusal = %+v", r)
	}
	if noted.Load() < 5 {
		t.Errorf("%d admitted results carry the soft note; want those past 15 of 30 units", noted.Load())
	}
	// another tenant: no budget, no charge
	if _, err := gates[0].Dispatch(dispatch.WithTenant(t.Context(), "other"), "s", []envelope.ToolUseBlock{{Type: "tool_use", ID: "x", Name: "search", Input: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
}
