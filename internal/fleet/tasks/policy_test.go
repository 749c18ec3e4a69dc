package tasks_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// policyGate stands in for the policy gate in front of the dispatcher: it
// records what a task's context tells the gate, and refuses every call
// of the tool "over" as over budget (without dispatching).
type policyGate struct {
	next  tasks.Dispatcher
	mu    sync.Mutex
	seen  []string // "key no-cache" per Dispatch
	reset time.Duration
}

func (g *policyGate) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	g.mu.Lock()
	fresh := "cached"
	if policy.NoCacheFrom(ctx) {
		fresh = "no-cache"
	}
	g.seen = append(g.seen, policy.KeyNameFrom(ctx)+" "+fresh)
	g.mu.Unlock()
	if calls[0].Name == "over" {
		ex := &policy.ExhaustedError{RetryAfter: g.reset}
		for _, c := range calls {
			ex.Results = append(ex.Results, envelope.Result{CallID: c.ID, Tool: c.Name, IsError: true, Code: classify.CodeBudgetExhausted,
				Content: envelope.Text(classify.BudgetExhaustedMessage(classify.Budget{Name: "b", Tool: c.Name, Limit: 1, Spent: 1, Period: "per day", ResetIn: g.reset}))})
		}
		return nil, ex
	}
	return g.next.Dispatch(ctx, session, calls)
}

func (g *policyGate) calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.seen...)
}

// A task carries the API key's name and the wish for fresh results to the
// gate; a task every call of which is over budget is refused at Start,
// as a sync call gets its 429, and nothing is kept.
func TestTaskPolicy(t *testing.T) {
	f := newFleet(t)
	g := &policyGate{reset: time.Hour}
	a := f.replica("a", func(c *tasks.Config) { g.next = c.Dispatcher; c.Dispatcher = g })
	ctx := bg(t)
	task, err := a.store.Start(ctx, tasks.Request{Tenant: "acme", KeyName: "ci-bot", NoCache: true, Calls: calls("quick", "q", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if done := waitFinal(t, a.store, "acme", task.ID); done.State != tasks.StateCompleted {
		t.Fatalf("task %+v", done)
	}
	if _, err := a.store.Start(ctx, tasks.Request{Tenant: "acme", Calls: calls("quick", "r", 1)}); err != nil {
		t.Fatal(err)
	}
	_, err = a.store.Start(ctx, tasks.Request{Tenant: "acme", KeyName: "ci-bot", Calls: calls("over", "o", 2)})
	var over *policy.ExhaustedError
	if !errors.As(err, &over) || over.RetryAfter != time.Hour || len(over.Results) != 2 {
		t.Fatalf("over budget: %v", err)
	}
	got := g.calls()
	if len(got) != 3 || got[0] != "ci-bot no-cache" || got[1] != " cached" || got[2] != "ci-bot cached" {
		t.Errorf("the gate saw %q", got)
	}
}
