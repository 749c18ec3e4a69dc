package approval_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// oneTool is a catalog of one tool.
type oneTool struct {
	name string
	info pooltype.ToolInfo
}

func (c oneTool) Lookup(_ context.Context, name string) (pooltype.ToolInfo, bool) {
	return c.info, name == c.name
}
func (c oneTool) Names(context.Context) []string { return []string{c.name} }

// runner is the dispatcher behind the gate: it counts the calls it runs.
type runner struct {
	mu  sync.Mutex
	ran []string
}

func (r *runner) Dispatch(_ context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		r.ran = append(r.ran, c.ID)
		out[i] = envelope.Result{CallID: c.ID, Content: envelope.Content{{Type: "text", Text: "ran " + c.ID}}}
	}
	return out, nil
}

func (r *runner) runs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ran...)
}

// The policy gate on the real store: a held call runs once approved on
// another replica; a denial and a timeout answer the model in its words
// without running; a request whose deadline comes first gets
// approval_pending, and the same call sent again after the decision runs.
func TestGateOnTheStore(t *testing.T) {
	srv := natstest.Start(t)
	a, b := start(t, srv), start(t, srv)
	ctx := dispatch.WithTenant(ctxFor(t), "acme")
	rule := &tools.ApprovalRule{When: []tools.ApprovalMatch{{Field: "input.path", Pattern: "/etc/**"}}, Timeout: time.Hour}
	next := &runner{}
	g, err := policy.New(policy.Config{Next: next, Catalog: oneTool{"write_file", pooltype.ToolInfo{Approval: rule}}, Approvals: a.s})
	if err != nil {
		t.Fatal(err)
	}
	block := func(id, path string) []envelope.ToolUseBlock {
		return []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: "write_file", Input: json.RawMessage(`{"path":"` + path + `"}`)}}
	}
	type turn struct {
		res []envelope.Result
		err error
	}
	dispatchAsync := func(ctx context.Context, calls []envelope.ToolUseBlock) <-chan turn {
		ch := make(chan turn, 1)
		go func() {
			res, err := g.Dispatch(ctx, "sess", calls)
			ch <- turn{res, err}
		}()
		return ch
	}
	pendingID := func() string {
		var id string
		natstest.Eventually(t, waitLong, "a pending approval", func() bool {
			list, err := b.s.List(ctx, false)
			if err == nil && len(list) == 1 {
				id = list[0].ID
			}
			return id != ""
		})
		return id
	}

	// Not under the rule: runs at once, nothing recorded.
	res, err := g.Dispatch(ctx, "sess", block("toolu_home", "/home/a"))
	if err != nil || res[0].IsError || len(next.runs()) != 1 {
		t.Fatalf("a call the rule does not name: %+v, %v", res, err)
	}

	// Approved on the other replica: runs.
	done := dispatchAsync(ctx, block("toolu_ok", "/etc/hosts"))
	if _, err := b.s.Decide(ctx, pendingID(), true, "alice", "", approval.ViaConsole); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.res[0].IsError || got.res[0].Content[0].Text != "ran toolu_ok" {
		t.Fatalf("approved: %+v, %v", got.res, got.err)
	}

	// Denied: the model reads the reason; nothing ran.
	done = dispatchAsync(ctx, block("toolu_no", "/etc/shadow"))
	if _, err := b.s.Decide(ctx, pendingID(), false, "bob", "not on a Friday", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	got = <-done
	if got.err != nil || !got.res[0].IsError || got.res[0].Code != classify.CodeNotApproved ||
		got.res[0].Content[0].Text != classify.NotApprovedMessage("write_file", "not on a Friday") {
		t.Fatalf("denied: %+v, %v", got.res, got.err)
	}

	// The request's deadline comes first: approval_pending; approved then,
	// the same call sent again runs.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	res, err = g.Dispatch(short, "sess", block("toolu_later", "/etc/motd"))
	cancel()
	if err != nil || !res[0].IsError || res[0].Code != classify.CodeApprovalPending || !strings.Contains(res[0].Content[0].Text, "send the same call again later") {
		t.Fatalf("deadline first: %+v, %v", res, err)
	}
	if _, err := b.s.Decide(ctx, pendingID(), true, "carol", "", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	res, err = g.Dispatch(ctx, "sess", block("toolu_later", "/etc/motd"))
	if err != nil || res[0].IsError || res[0].Content[0].Text != "ran toolu_later" {
		t.Fatalf("sent again after the approval: %+v, %v", res, err)
	}
	if runs := strings.Join(next.runs(), " "); runs != "toolu_home toolu_ok toolu_later" {
		t.Fatalf("the tool ran %q; want the calls not under the rule and the approved ones only", runs)
	}
}
