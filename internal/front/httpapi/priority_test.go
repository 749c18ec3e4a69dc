package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestParseKeysWeightsAndPriorities(t *testing.T) {
	t.Parallel()
	ks, err := ParseKeys(nil, []byte(`keys:
  - {tenant: big, key: big-1-0123456789abcdef, weight: 3}
  - {tenant: big, key: big-2-0123456789abcdef, priority: high}
  - {tenant: batch, key: batch-0123456789abcdef, priority: low, max_priority: normal}
  - {tenant: plain, key: plain-0123456789abcdef}
  - {tenant: ops, key: ops-0123456789abcdef, max_priority: HIGH}
`), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]Key{
		// A key that gives no weight takes its tenant's.
		"big-1-0123456789abcdef": {Tenant: "big", Weight: 3, Priority: dispatch.PriorityNormal, MaxPriority: dispatch.PriorityNormal},
		"big-2-0123456789abcdef": {Tenant: "big", Weight: 3, Priority: dispatch.PriorityHigh, MaxPriority: dispatch.PriorityHigh},
		"batch-0123456789abcdef": {Tenant: "batch", Weight: 1, Priority: dispatch.PriorityLow, MaxPriority: dispatch.PriorityNormal},
		"plain-0123456789abcdef": {Tenant: "plain", Weight: 1, Priority: dispatch.PriorityNormal, MaxPriority: dispatch.PriorityNormal},
		"ops-0123456789abcdef":   {Tenant: "ops", Weight: 1, Priority: dispatch.PriorityNormal, MaxPriority: dispatch.PriorityHigh},
	} {
		k, ok := ks.Lookup(token)
		if !ok || k.Tenant != want.Tenant || k.Weight != want.Weight || k.Priority != want.Priority || k.MaxPriority != want.MaxPriority {
			t.Errorf("%s: %+v, want %+v", token, k, want)
		}
	}
	if ks.Weight("big") != 3 || ks.Weight("plain") != 1 || ks.Weight("nobody") != 1 {
		t.Errorf("weights: big %d, plain %d, nobody %d", ks.Weight("big"), ks.Weight("plain"), ks.Weight("nobody"))
	}

	for doc, want := range map[string]string{
		`[{tenant: a, key: a-0123456789abcdef, weight: 0}]`:                                                                                        `keys.yaml: keys[0].weight: must be between 1 and 1000, got 0`,
		`[{tenant: a, key: a-0123456789abcdef, weight: -2}]`:                                                                                       `keys.yaml: keys[0].weight: must be between 1 and 1000, got -2`,
		`[{tenant: a, key: a-0123456789abcdef, weight: heavy}]`:                                                                                    `keys.yaml: `,
		`[{tenant: a, key: a-0123456789abcdef, priority: urgent}]`:                                                                                 `keys.yaml: keys[0].priority: "urgent" is not a priority: want low, normal or high`,
		`[{tenant: a, key: a-0123456789abcdef, max_priority: top}]`:                                                                                `keys.yaml: keys[0].max_priority: "top" is not a priority: want low, normal or high`,
		`[{tenant: a, key: a-0123456789abcdef, priority: high, max_priority: normal}]`:                                                             `keys.yaml: keys[0].priority: high is above max_priority normal`,
		`[{tenant: a, key: a-0123456789abcdef, weight: 2}, {tenant: b, key: b-0123456789abcdef}, {tenant: a, key: c-0123456789abcdef, weight: 5}]`: `keys.yaml: keys[2].weight: 5, but keys.yaml: keys[0] gives tenant "a" weight 2; a tenant has one weight, give its keys the same`,
	} {
		if _, err := ParseKeys(nil, []byte(doc), "keys.yaml"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", doc, err, want)
		}
	}

	// The weights of a file and of the environment belong together.
	file, err := ParseKeys(nil, []byte(`[{tenant: a, key: a-0123456789abcdef, weight: 2}]`), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseKeys(file, []byte(`[{tenant: a, key: e-0123456789abcdef, weight: 4}]`), EnvAPIKeys)
	if want := `TOOLPOOL_API_KEYS: keys[0].weight: 4, but keys.yaml: keys[0] gives tenant "a" weight 2`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("file and environment: %v, want %s", err, want)
	}
}

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
	ks, err := ParseKeys(nil, []byte(`keys:
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
