package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

func registry(t *testing.T) *tools.Registry {
	t.Helper()
	r := tools.NewRegistry()
	if err := demo.Register(r); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return r
}

func lookup(t *testing.T, r *tools.Registry, name string) *tools.Registered {
	t.Helper()
	rt, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%s): not registered", name)
	}
	return rt
}

func text(t *testing.T, out tools.Output) string {
	t.Helper()
	if len(out.Content) != 1 || out.Content[0].Type != "text" {
		t.Fatalf("content %+v, want one text block", out.Content)
	}
	return out.Content[0].Text
}

// attempt is a context carrying the CallInfo of attempt n of a call.
func attempt(parent context.Context, n int) context.Context {
	return tools.WithCallInfo(parent, tools.CallInfo{ID: "toolu_1", Tool: "flaky", Attempt: n})
}

func TestRegister(t *testing.T) {
	t.Parallel()
	r := registry(t)
	if got, want := r.Names(), []string{"echo", "flaky", "sleep"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, d := range r.Definitions() {
		if len(d.Description) < 40 {
			t.Errorf("%s: description %q is too thin for a model", d.Name, d.Description)
		}
	}
	timeouts := map[string]time.Duration{"echo": demo.EchoTimeout, "sleep": demo.SleepTimeout, "flaky": demo.FlakyTimeout}
	for name, want := range timeouts {
		if rt := lookup(t, r, name); rt.Timeout != want || !rt.Idempotent {
			t.Errorf("%s: Timeout %v Idempotent %v, want %v true", name, rt.Timeout, rt.Idempotent, want)
		}
	}
	if err := demo.Register(r); !errors.Is(err, tools.ErrDuplicateTool) {
		t.Errorf("Register twice: %v, want ErrDuplicateTool", err)
	}
}

func TestSchemas(t *testing.T) {
	t.Parallel()
	r := registry(t)
	cases := []struct {
		tool, input string
		want        string // "" for valid, else the error must contain it
	}{
		{"echo", `{"text":"hi"}`, ""},
		{"echo", `{"text":""}`, ""},
		{"echo", `{}`, "text: is required"},
		{"echo", `{"text":1}`, "text: must be a string, got number"},
		{"sleep", `{"ms":0}`, ""},
		{"sleep", `{"ms":600000}`, ""},
		{"sleep", `{"ms":600001}`, "ms: must be <= 600000"},
		{"sleep", `{"ms":-1}`, "ms: must be >= 0"},
		{"sleep", `{"ms":1.5}`, "ms: must be an integer, got number"},
		{"sleep", `{}`, "ms: is required"},
		{"flaky", `{"fail":"503"}`, ""},
		{"flaky", `{"fail":"429","times":3,"retry_after_s":2}`, ""},
		{"flaky", `{"fail":"panic","times":0}`, ""},
		{"flaky", `{"times":1}`, "fail: is required"},
		{"flaky", `{"fail":"500"}`, `fail: must be one of "timeout", "429", "503", "404", "connect", "panic"`},
		{"flaky", `{"fail":"404","times":-1}`, "times: must be >= 0"},
		{"flaky", `{"fail":"429","retry_after_s":-5}`, "retry_after_s: must be >= 0"},
	}
	for _, tc := range cases {
		err := lookup(t, r, tc.tool).Validate(json.RawMessage(tc.input))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v, want valid", tc.tool, tc.input, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: %v, want an error containing %q", tc.tool, tc.input, err, tc.want)
		}
	}
}

func TestEcho(t *testing.T) {
	t.Parallel()
	h := demo.Echo().Handler
	for _, s := range []string{"hello", "", "строка с \"кавычками\"\n"} {
		input, _ := json.Marshal(map[string]string{"text": s})
		out, err := h(context.Background(), input)
		if err != nil {
			t.Fatalf("echo(%q): %v", s, err)
		}
		if got := text(t, out); got != s {
			t.Errorf("echo(%q) = %q", s, got)
		}
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	h := demo.Sleep().Handler

	start := time.Now()
	out, err := h(context.Background(), json.RawMessage(`{"ms":30}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, out); got != "slept 30 ms" {
		t.Errorf("content %q, want %q", got, "slept 30 ms")
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Errorf("returned after %v, want >= 30ms", el)
	}

	// The tool's timeout fires: the error is a timeout, and it comes at once.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = h(ctx, json.RawMessage(`{"ms":600000}`))
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("sleep ignored its context: returned after %v", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sleep past its timeout: %v, want context.DeadlineExceeded", err)
	}
	if d := classify.Classify(err); d.Code != classify.CodeTimeout || !d.Retryable {
		t.Errorf("Classify = %s retryable %v, want %s retryable", d.Code, d.Retryable, classify.CodeTimeout)
	}

	// The worker stops: canceled, not a timeout.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err = h(ctx, json.RawMessage(`{"ms":600000}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("sleep on a canceled context: %v, want context.Canceled", err)
	}
}

func TestFlaky(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fail       string
		retryAfter int
		code       string
		class      envelope.Class
		retryable  bool
		wantAfter  time.Duration
	}{
		{"429", 0, classify.CodeHTTP429, envelope.ClassTransient, true, 0},
		{"429", 7, classify.CodeHTTP429, envelope.ClassTransient, true, 7 * time.Second},
		{"503", 0, "http_503", envelope.ClassTransient, true, 0},
		{"404", 0, "http_404", envelope.ClassPermanent, false, 0},
		{"connect", 0, classify.CodeConnRefused, envelope.ClassTransient, true, 0},
		{"timeout", 0, classify.CodeTimeout, envelope.ClassTransient, true, 0},
	}
	h := demo.Flaky().Handler
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s_%d", tc.fail, tc.retryAfter), func(t *testing.T) {
			t.Parallel()
			input := json.RawMessage(fmt.Sprintf(`{"fail":%q,"times":2,"retry_after_s":%d}`, tc.fail, tc.retryAfter))
			for n := 1; n <= 2; n++ {
				ctx, cancel := context.WithTimeout(attempt(context.Background(), n), 20*time.Millisecond)
				_, err := h(ctx, input)
				cancel()
				if err == nil {
					t.Fatalf("attempt %d succeeded, want a %s failure", n, tc.fail)
				}
				d := classify.Classify(err)
				if d.Code != tc.code || d.Class != tc.class || d.Retryable != tc.retryable || d.RetryAfter != tc.wantAfter {
					t.Errorf("attempt %d: Classify = code %s class %s retryable %v retry-after %v; want %s %s %v %v",
						n, d.Code, d.Class, d.Retryable, d.RetryAfter, tc.code, tc.class, tc.retryable, tc.wantAfter)
				}
			}
			out, err := h(attempt(context.Background(), 3), input)
			if err != nil {
				t.Fatalf("attempt 3: %v, want success", err)
			}
			if got := text(t, out); got != "ok after 3 attempts" {
				t.Errorf("attempt 3: %q, want %q", got, "ok after 3 attempts")
			}
		})
	}
}

func TestFlakyConnectIsARealRefusal(t *testing.T) {
	t.Parallel()
	_, err := demo.Flaky().Handler(attempt(context.Background(), 1), json.RawMessage(`{"fail":"connect"}`))
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect failure %#v: want a dial *net.OpError wrapping ECONNREFUSED", err)
	}
}

func TestFlakyDefaultsAndAttempts(t *testing.T) {
	t.Parallel()
	h := demo.Flaky().Handler
	cases := []struct {
		name  string
		ctx   context.Context
		input string
		want  string // content; "" means the attempt fails
	}{
		{"times defaults to 1: first attempt fails", attempt(context.Background(), 1), `{"fail":"503"}`, ""},
		{"times defaults to 1: second succeeds", attempt(context.Background(), 2), `{"fail":"503"}`, "ok after 2 attempts"},
		{"times 0 succeeds at once", attempt(context.Background(), 1), `{"fail":"503","times":0}`, "ok after 1 attempt"},
		{"no CallInfo is attempt 1", context.Background(), `{"fail":"503","times":1}`, ""},
		{"late attempt succeeds", attempt(context.Background(), 9), `{"fail":"404","times":5}`, "ok after 9 attempts"},
	}
	for _, tc := range cases {
		out, err := h(tc.ctx, json.RawMessage(tc.input))
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: succeeded, want a failure", tc.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := text(t, out); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFlakyPanics(t *testing.T) {
	t.Parallel()
	h := demo.Flaky().Handler
	input := json.RawMessage(`{"fail":"panic","times":1}`)
	func() {
		defer func() {
			if p := recover(); p == nil {
				t.Error("attempt 1 did not panic")
			}
		}()
		_, _ = h(attempt(context.Background(), 1), input)
	}()
	out, err := h(attempt(context.Background(), 2), input)
	if err != nil || text(t, out) != "ok after 2 attempts" {
		t.Errorf("attempt 2: %v %v, want success", out, err)
	}
}

// The timeout failure waits for the context: it is the worker's timeout that
// ends it, not the tool.
func TestFlakyTimeoutBlocksUntilContextEnds(t *testing.T) {
	t.Parallel()
	start := time.Now()
	ctx, cancel := context.WithTimeout(attempt(context.Background(), 1), 50*time.Millisecond)
	defer cancel()
	_, err := demo.Flaky().Handler(ctx, json.RawMessage(`{"fail":"timeout"}`))
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("returned after %v, before the context's timeout", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v, want context.DeadlineExceeded", err)
	}
}

func TestHandlersRejectBadInput(t *testing.T) {
	t.Parallel()
	for _, tl := range []tools.Tool{demo.Echo(), demo.Sleep(), demo.Flaky()} {
		_, err := tl.Handler(context.Background(), json.RawMessage(`{"text":`))
		if d := classify.Classify(err); d.Class != envelope.ClassValidation {
			t.Errorf("%s with broken JSON: %v (class %q), want a validation error", tl.Name, err, d.Class)
		}
	}
}
