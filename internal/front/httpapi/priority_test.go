package httpapi

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// schedDispatcher records what the scheduler would read of each dispatch.
type schedDispatcher struct {
	fakeDispatcher
	smu        sync.Mutex
	priorities []dispatch.Priority
	weights    []int
}

func (d *schedDispatcher) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	d.smu.Lock()
	d.priorities = append(d.priorities, dispatch.PriorityFrom(ctx))
	d.weights = append(d.weights, dispatch.WeightFrom(ctx))
	d.smu.Unlock()
	return d.fakeDispatcher.Dispatch(ctx, session, calls)
}

func (d *schedDispatcher) last() (dispatch.Priority, int, int) {
	d.smu.Lock()
	defer d.smu.Unlock()
	if len(d.priorities) == 0 {
		return 0, 0, 0
	}
	return d.priorities[len(d.priorities)-1], d.weights[len(d.weights)-1], len(d.priorities)
}

func TestPriorityOverride(t *testing.T) {
	t.Parallel()
	ks, err := apikey.Parse(nil, []byte(`keys:
  - {tenant: batch, key: batch-0123456789abcdef, weight: 2, priority: low, max_priority: normal}
  - {tenant: ops, key: ops-0123456789abcdef, max_priority: high}
`), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := &schedDispatcher{}
	h := newTestHandler(t, &d.fakeDispatcher, func(c *Config) { c.Keys = ks; c.Dispatcher = d })
	const turn = `[{"type":"tool_use","id":"1","name":"echo"}]`
	batch, ops := "Bearer batch-0123456789abcdef", "Bearer ops-0123456789abcdef"

	for _, tc := range []struct {
		name   string
		target string
		hdr    []string
		want   dispatch.Priority
		weight int
	}{
		{"the key's default", "/v1/tool_calls", []string{"Authorization", batch}, dispatch.PriorityLow, 2},
		{"raised by the header within the key's max", "/v1/tool_calls", []string{"Authorization", batch, HeaderPriority, "normal"}, dispatch.PriorityNormal, 2},
		{"asked by the query", "/v1/tool_calls?priority=high", []string{"Authorization", ops}, dispatch.PriorityHigh, 1},
		{"lowered", "/v1/tool_calls?priority=low", []string{"Authorization", ops}, dispatch.PriorityLow, 1},
		{"the header wins over the query", "/v1/tool_calls?priority=low", []string{"Authorization", ops, HeaderPriority, "High"}, dispatch.PriorityHigh, 1},
	} {
		_, _, before := d.last()
		w := do(h, "POST", tc.target, turn, tc.hdr...)
		p, weight, n := d.last()
		if w.Code != http.StatusOK || n != before+1 || p != tc.want || weight != tc.weight {
			t.Errorf("%s: %d %s; dispatched priority %s weight %d (%d dispatches), want %s weight %d",
				tc.name, w.Code, w.Body, p, weight, n-before, tc.want, tc.weight)
		}
	}

	for _, tc := range []struct {
		name   string
		target string
		hdr    []string
		status int
		typ    string
		msg    string
	}{
		{"above the key's max", "/v1/tool_calls", []string{"Authorization", batch, HeaderPriority, "high"}, http.StatusForbidden, ErrorForbidden,
			"the Toolpool-Priority header asks for priority high, above what this API key allows: at most normal (its default is low)"},
		{"above the key's max by query", "/v1/tool_calls?priority=high", []string{"Authorization", batch}, http.StatusForbidden, ErrorForbidden,
			"the priority parameter asks for priority high, above what this API key allows: at most normal (its default is low)"},
		{"not a priority", "/v1/tool_calls", []string{"Authorization", ops, HeaderPriority, "urgent"}, http.StatusBadRequest, ErrorInvalidRequest,
			`the Toolpool-Priority header "urgent" is not a priority: want low, normal or high`},
		{"not a priority by query", "/v1/tool_calls?priority=9", []string{"Authorization", ops}, http.StatusBadRequest, ErrorInvalidRequest,
			`the priority parameter "9" is not a priority: want low, normal or high`},
	} {
		_, _, before := d.last()
		w := do(h, "POST", tc.target, turn, tc.hdr...)
		_, _, n := d.last()
		if w.Code != tc.status || n != before {
			t.Errorf("%s: %d %s (%d dispatches), want %d and nothing dispatched", tc.name, w.Code, w.Body, n-before, tc.status)
			continue
		}
		if e := decodeError(t, w); e.Type != tc.typ || e.Message != tc.msg {
			t.Errorf("%s: error %+v, want %s %q", tc.name, e, tc.typ, tc.msg)
		}
	}
}

// Without API keys a request may ask for any priority; its weight is 1.
func TestPriorityWithoutKeys(t *testing.T) {
	t.Parallel()
	d := &schedDispatcher{}
	h := newTestHandler(t, &d.fakeDispatcher, func(c *Config) { c.Dispatcher = d })
	w := do(h, "POST", "/v1/tool_calls?priority=high", `[{"type":"tool_use","id":"1","name":"echo"}]`)
	if p, weight, n := d.last(); w.Code != http.StatusOK || n != 1 || p != dispatch.PriorityHigh || weight != 1 {
		t.Errorf("%d %s: priority %s weight %d", w.Code, w.Body, p, weight)
	}
}
