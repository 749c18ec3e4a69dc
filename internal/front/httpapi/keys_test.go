package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// tenantDispatcher records the tenant of each dispatch.
type tenantDispatcher struct {
	fakeDispatcher
	tenants []string
}

func (d *tenantDispatcher) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	d.mu.Lock()
	d.tenants = append(d.tenants, dispatch.TenantFrom(ctx))
	d.mu.Unlock()
	return d.fakeDispatcher.Dispatch(ctx, session, calls)
}

// Calls carry the key's tenant; a restricted key's calls to other tools
// never reach the dispatcher and their errors name only the key's tools.
func TestKeysScopeTheCalls(t *testing.T) {
	t.Parallel()
	ks, err := apikey.Parse(nil, []byte(`[{tenant: a, key: a-0123456789abcdef}, {tenant: b, key: b-0123456789abcdef, tools: [echo, gone]}]`), "t")
	if err != nil {
		t.Fatal(err)
	}
	d := &tenantDispatcher{}
	h := newTestHandler(t, &d.fakeDispatcher, func(c *Config) { c.Keys = ks; c.Dispatcher = d })
	turn := `[{"type":"tool_use","id":"1","name":"echo"},{"type":"tool_use","id":"2","name":"sleep"},{"type":"tool_use","id":"3","name":"gone"}]`
	w := do(h, "POST", "/v1/tool_calls", turn, "Authorization", "Bearer b-0123456789abcdef")
	var msg UserMessage
	if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil || w.Code != 200 || len(msg.Content) != 3 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for i, want := range []string{"echo:", "There is no tool named sleep. Available tools: echo.", "There is no tool named gone. Available tools: echo."} {
		if !strings.Contains(msg.Content[i].Content.Text(), want) {
			t.Errorf("content[%d] %q, want %q", i, msg.Content[i].Content.Text(), want)
		}
	}
	w = do(h, "POST", "/v1/tool_calls", turn, "Authorization", "Bearer a-0123456789abcdef")
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	calls := d.dispatched()
	if len(calls) != 2 || len(calls[0]) != 1 || calls[0][0].Name != "echo" || len(calls[1]) != 3 {
		t.Errorf("dispatched %v", calls)
	}
	if strings.Join(d.tenants, ",") != "b,a" {
		t.Errorf("tenants %v", d.tenants)
	}
	w = do(h, "GET", "/v1/tools", "", "Authorization", "Bearer b-0123456789abcdef")
	if !strings.Contains(w.Body.String(), `"echo"`) || strings.Contains(w.Body.String(), `"sleep"`) {
		t.Errorf("b's tools %s", w.Body)
	}
	if w := do(h, "GET", "/v1/tools", ""); w.Code != http.StatusUnauthorized || decodeError(t, w).Type != ErrorUnauthorized {
		t.Errorf("no key: %d %s", w.Code, w.Body)
	}
}

// A saturated pool's 429 carries the turn's answer, each call an is_error
// that says so, in the request's format (issue 12, finding 9).
func TestSaturatedIs429WithAnAnswer(t *testing.T) {
	t.Parallel()
	sat := &dispatch.SaturatedError{Load: 10, Limit: 10, RetryAfter: 3 * dispatch.SaturatedRetryAfterDefault / 2}
	f := &fakeDispatcher{err: sat}
	h := newTestHandler(t, f)
	w := do(h, "POST", "/v1/tool_calls", `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo"},{"type":"tool_use","id":"b","name":"sleep"}]}`)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3" || w.Header().Get(HeaderErrorIndexes) != "0,1" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	var msg UserMessage
	if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil || msg.Role != "user" || len(msg.Content) != 2 {
		t.Fatalf("body %s", w.Body)
	}
	for _, b := range msg.Content {
		if !b.IsError || !strings.Contains(b.Content.Text(), "saturated") || !strings.Contains(b.Content.Text(), "again in 3s") {
			t.Errorf("block %+v", b)
		}
	}
	w = do(h, "POST", "/v1/tool_calls", `{"tool_calls":[{"id":"c","function":{"name":"echo","arguments":"{}"}}]}`)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"content":"Error: The call to echo was not run: the tool pool is saturated`) {
		t.Errorf("openai: %d %s", w.Code, w.Body)
	}
}
