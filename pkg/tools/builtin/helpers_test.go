package builtin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// harness holds tools registered the way a worker holds them, so calls are
// validated against the schema before the handler runs.
type harness struct {
	t   *testing.T
	reg *tools.Registry
}

func newHarness(t *testing.T, ts ...tools.Tool) *harness {
	t.Helper()
	h := &harness{t: t, reg: tools.NewRegistry()}
	for _, tool := range ts {
		if err := h.reg.Register(tool); err != nil {
			t.Fatalf("register %s: %v", tool.Name, err)
		}
	}
	return h
}

// call validates input and runs the tool's handler under its timeout.
func (h *harness) call(tool, input string) (string, error) {
	h.t.Helper()
	return h.callCtx(context.Background(), tool, input)
}

func (h *harness) callCtx(ctx context.Context, tool, input string) (string, error) {
	h.t.Helper()
	rt, ok := h.reg.Lookup(tool)
	if !ok {
		h.t.Fatalf("no tool %s", tool)
	}
	if err := rt.Validate(json.RawMessage(input)); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, rt.Timeout)
	defer cancel()
	out, err := rt.Handler(ctx, json.RawMessage(input))
	return out.Content.Text(), err
}

// mustCall is call that fails the test on an error.
func (h *harness) mustCall(tool, input string) string {
	h.t.Helper()
	out, err := h.call(tool, input)
	if err != nil {
		h.t.Fatalf("%s %s: %v\n%s", tool, input, err, message(tool, err))
	}
	return out
}

// message is what the model would read for err.
func message(tool string, err error) string {
	return classify.Classify(err).Message(classify.MessageInput{Tool: tool, Attempts: 1})
}

// wantErr checks err's class and code (code "" means any) and that the
// model's message contains each of want.
func wantErr(t *testing.T, tool string, err error, class envelope.Class, code string, want ...string) classify.Decision {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s %s", tool, class, code)
	}
	d := classify.Classify(err)
	if d.Class != class || code != "" && d.Code != code {
		t.Errorf("%s: %v: class %s code %s, want %s %s", tool, err, d.Class, d.Code, class, code)
	}
	msg := d.Message(classify.MessageInput{Tool: tool, Attempts: 1})
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: message %q does not contain %q", tool, msg, w)
		}
	}
	return d
}

// jsonInput marshals v as a tool input.
func jsonInput(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
