package mcpfront

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// recTasks is memTasks that records the requests, or refuses them with
// err.
type recTasks struct {
	memTasks
	mu   sync.Mutex
	reqs []tasks.Request
	err  error
}

func (s *recTasks) Start(ctx context.Context, req tasks.Request) (tasks.Task, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return tasks.Task{}, err
	}
	return s.memTasks.Start(ctx, req)
}

// A task-augmented tools/call carries its no-cache wish to the task; a
// task over budget is answered at once with the budget's words.
func TestTaskPolicy(t *testing.T) {
	d := &gated{release: make(chan struct{})}
	close(d.release)
	st := &recTasks{memTasks: memTasks{d: d}}
	c := newStdioTasks(t, d, st)
	meta := strings.Replace(extMeta(true), `"_meta":{`, `"_meta":{"io.toolpool/cache":"no-cache",`, 1)
	created := decode[extTaskAnswer](t, c.call("tools/call", `{"name":"slow","arguments":{},`+meta+`}`))
	if created.TaskID == "" || len(st.reqs) != 1 || !st.reqs[0].NoCache {
		t.Fatalf("task %+v, requests %+v", created, st.reqs)
	}
	st.err = &policy.ExhaustedError{RetryAfter: time.Hour, Results: []envelope.Result{{Tool: "slow", IsError: true, Code: classify.CodeBudgetExhausted,
		Content: envelope.Text("The call to slow was not run: the budget \"b\" allows 1 call per day")}}}
	a := c.call("tools/call", `{"name":"slow","arguments":{},`+extMeta(true)+`}`)
	if a.Error != nil || !strings.Contains(string(a.Result), `the budget \"b\" allows 1 call per day`) || !strings.Contains(string(a.Result), `"isError":true`) ||
		!strings.Contains(string(a.Result), `"io.toolpool/code":"budget_exhausted"`) || st.reqs[1].NoCache {
		t.Fatalf("over budget: %s %+v", a.Result, a.Error)
	}
}

// A call over budget, not as a task: the budget's words, and the result's
// code in _meta.
func TestOverBudgetCall(t *testing.T) {
	g := &overGate{}
	c := newStdioTasks(t, g, nil)
	a := c.call("tools/call", `{"name":"slow","arguments":{},`+extMeta(false)+`}`)
	if a.Error != nil || !strings.Contains(string(a.Result), `not run: the budget`) || !strings.Contains(string(a.Result), `"io.toolpool/code":"budget_exhausted"`) {
		t.Fatalf("%s %+v", a.Result, a.Error)
	}
}

type overGate struct{}

func (overGate) Dispatch(_ context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	return nil, &policy.ExhaustedError{RetryAfter: time.Minute, Results: []envelope.Result{{CallID: calls[0].ID, Tool: calls[0].Name, IsError: true,
		Code: classify.CodeBudgetExhausted, Content: envelope.Text("The call to slow was not run: the budget \"b\" is spent")}}}
}
