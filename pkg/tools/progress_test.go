package tools_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolpool/toolpool/internal/infra/callctx"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestProgressBounded(t *testing.T) {
	long := strings.Repeat("é", tools.MaxProgressMessageBytes) // 2 bytes each
	for _, tc := range []struct {
		name string
		in   tools.Progress
	}{
		{"long message", tools.Progress{Progress: 1, Message: long}},
		{"invalid utf-8", tools.Progress{Progress: 1, Message: "ok \xff\xfe"}},
		{"not finite", tools.Progress{Progress: math.NaN(), Total: math.Inf(1), Message: "x"}},
		{"small", tools.Progress{Progress: 2, Total: 3, Message: "two of three"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Bounded()
			if len(got.Message) > tools.MaxProgressMessageBytes {
				t.Errorf("message is %d bytes, over %d", len(got.Message), tools.MaxProgressMessageBytes)
			}
			if !utf8.ValidString(got.Message) {
				t.Errorf("message %q is not valid UTF-8", got.Message)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("json.Marshal(%+v): %v", got, err)
			}
			if len(tc.in.Message) > tools.MaxProgressMessageBytes && !strings.HasSuffix(got.Message, "…") {
				t.Errorf("a cut message should end with …, got ...%q", got.Message[len(got.Message)-8:])
			}
		})
	}
	small := tools.Progress{Progress: 2, Total: 3, Message: "two of three"}
	if got := small.Bounded(); got != small {
		t.Errorf("Bounded changed a small report: %+v", got)
	}
}

// fakeCall is a running call (as a worker's context carries it under
// callctx.Key) that records the progress reported to it.
type fakeCall struct {
	info tools.CallInfo
	got  []tools.Progress
}

func (c *fakeCall) CallInfo() tools.CallInfo        { return c.info }
func (c *fakeCall) ReportProgress(p tools.Progress) { c.got = append(c.got, p) }

// A context carrying a call under callctx.Key answers CallInfoFrom and
// ReportProgress from it; values set closer to the handler (WithCallInfo,
// WithProgressReporter, WithReporter) take precedence, and a nil reporter
// silences the call's.
func TestRunningCall(t *testing.T) {
	call := &fakeCall{info: tools.CallInfo{ID: "toolu_1", Tool: "echo", Attempt: 2}}
	ctx := context.WithValue(t.Context(), callctx.Key{}, call)
	if ci, ok := tools.CallInfoFrom(ctx); !ok || ci != call.info {
		t.Errorf("CallInfoFrom = %+v, %v; want the Call's %+v", ci, ok, call.info)
	}
	tools.ReportProgress(ctx, tools.Progress{Progress: 1})
	if len(call.got) != 1 {
		t.Fatalf("the Call got %d reports, want 1", len(call.got))
	}

	own := tools.CallInfo{ID: "toolu_2"}
	if ci, _ := tools.CallInfoFrom(tools.WithCallInfo(ctx, own)); ci != own {
		t.Errorf("CallInfoFrom under WithCallInfo = %+v, want %+v", ci, own)
	}
	var mine []tools.Progress
	tools.ReportProgress(tools.WithProgressReporter(ctx, func(p tools.Progress) { mine = append(mine, p) }), tools.Progress{Progress: 2})
	tools.ReportProgress(tools.WithProgressReporter(ctx, nil), tools.Progress{Progress: 3})
	tools.ReportProgress(tools.WithReporter(ctx, nil), tools.Progress{Progress: 4})
	if len(mine) != 1 || len(call.got) != 1 {
		t.Errorf("reports: %v to the inner reporter, %v to the Call; want one to the inner reporter, none more to the Call", mine, call.got)
	}

	if _, ok := tools.CallInfoFrom(t.Context()); ok {
		t.Error("CallInfoFrom found a call in a context without one")
	}
	tools.ReportProgress(t.Context(), tools.Progress{Progress: 5}) // nobody listens: nothing happens
}
