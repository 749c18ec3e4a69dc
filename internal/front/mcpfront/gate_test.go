package mcpfront

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// With the real policy gate in front of the dispatcher (its approval
// store in memory here; the JetStream one is the approval package's):
// a 2026-07-28 host approves through input_required, the retry finds the
// same approval, and the tool runs once.

type gateCatalog map[string]pooltype.ToolInfo

func (c gateCatalog) Lookup(_ context.Context, name string) (pooltype.ToolInfo, bool) {
	info, ok := c[name]
	return info, ok
}

func (c gateCatalog) Names(context.Context) []string { return nil }

// memApprovals is policy.Approvals and HostApprovals in memory.
type memApprovals struct {
	mu      sync.Mutex
	d       map[string]policy.Decision
	changed chan struct{}
}

func (m *memApprovals) Required(c *policy.Call) bool { return c.Info.Approval != nil }

func (m *memApprovals) Hold(_ context.Context, c *policy.Call) (policy.Decision, error) {
	sum := sha256.Sum256([]byte(c.Tenant + "\x00" + c.Session + "\x00" + c.ID + "\x00" + c.Tool + "\x00" + string(c.Input)))
	id := "ap-" + hex.EncodeToString(sum[:10])
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.d[id]; ok {
		return d, nil
	}
	m.d[id] = policy.Decision{ID: id}
	return m.d[id], nil
}

func (m *memApprovals) Wait(ctx context.Context, id string) (policy.Decision, error) {
	for {
		m.mu.Lock()
		d := m.d[id]
		m.mu.Unlock()
		if d.State != policy.Pending {
			return d, nil
		}
		select {
		case <-m.changed:
		case <-ctx.Done():
			return d, ctx.Err()
		}
	}
}

// Use lets an approved call through: the tests here send each approved
// call once more at most, within what would be the window of its use
// (the approval package tests the spending of an approval).
func (m *memApprovals) Use(_ context.Context, _ *policy.Call, id string) (policy.Decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.d[id], nil
}

func (m *memApprovals) Decide(_ context.Context, id string, approve bool, by, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.d[id]
	if !ok || d.State != policy.Pending {
		return &approvalError{id}
	}
	d.State, d.By, d.Reason = policy.Denied, by, reason
	if approve {
		d.State = policy.Approved
	}
	m.d[id] = d
	select {
	case m.changed <- struct{}{}:
	default:
	}
	return nil
}

type approvalError struct{ id string }

func (e *approvalError) Error() string { return "approval " + e.id + " is not pending" }

// runs counts the calls the dispatcher behind the gate ran.
type runs struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *runs) Dispatch(_ context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		r.n[c.Name]++
		out[i] = envelope.Result{CallID: c.ID, Tool: c.Name, Content: envelope.Text("ran " + c.Name + " " + string(c.Input))}
	}
	return out, nil
}

func TestHostApprovalThroughTheGate(t *testing.T) {
	next := &runs{n: map[string]int{}}
	store := &memApprovals{d: map[string]policy.Decision{}, changed: make(chan struct{}, 1)}
	g, err := policy.New(policy.Config{Next: next, Approvals: store,
		Catalog: gateCatalog{"write": {Approval: &tools.ApprovalRule{Timeout: time.Minute}}, "read": {}}})
	if err != nil {
		t.Fatal(err)
	}
	_, url := serve(t, Config{Dispatcher: g, Tools: staticTools, HostApprovals: store})
	asked := 0
	cs := dial26(t, url, "", func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	})
	ctx, cancel := context.WithTimeout(dispatch.WithTenant(t.Context(), "acme"), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": "/etc/x"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `ran write {"path":"/etc/x"}`) {
		t.Fatalf("approved: %+v, %v", res, err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("a call that needs no approval: %+v, %v", res, err)
	}
	next.mu.Lock()
	defer next.mu.Unlock()
	if asked != 1 || next.n["write"] != 1 || next.n["read"] != 1 {
		t.Errorf("asked %d times, ran %v", asked, next.n)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.d) != 1 {
		t.Errorf("%d approvals, want 1: %+v", len(store.d), store.d)
	}
	for _, d := range store.d {
		if d.State != policy.Approved || d.By != "an MCP host via test-host" {
			t.Errorf("decision %+v", d)
		}
	}
}
