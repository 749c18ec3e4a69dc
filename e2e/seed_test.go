package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// The seed tutorial's three exercises, through a real JetStream server.

// fastRetry is a retry policy that keeps the tests quick.
var fastRetry = classify.Policy{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}

// hangingTool is a tool whose attempts for which hang reports true block
// until the attempt's timeout ends them; the others answer "found it".
func hangingTool(name string, execs *atomic.Int64, hang func(attempt int) bool) tools.Tool {
	return tools.Tool{
		Name:        name,
		Description: "searches, sometimes too slowly",
		InputSchema: objectSchema(`{"q":{"type":"string"}}`, "q"),
		Timeout:     300 * time.Millisecond,
		Retry:       fastRetry,
		Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			execs.Add(1)
			if hang(attemptOf(ctx)) {
				<-ctx.Done()
				return tools.Output{}, ctx.Err()
			}
			return tools.Text("found it"), nil
		},
	}
}

// Exercise 1: the first attempt times out, the second succeeds.
func TestSeedTimeoutThenSuccess(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	p := newPool(t, hangingTool("search", &execs, func(n int) bool { return n == 1 }))
	p.startWorker()

	res := p.call("search", `{"q":"weather"}`)

	if res.IsError {
		t.Fatalf("result is an error: %+v", res)
	}
	if got := res.Content.Text(); got != "found it" {
		t.Errorf("content = %q, want %q", got, "found it")
	}
	if res.Attempts != 2 {
		t.Errorf("result attempts = %d, want 2", res.Attempts)
	}
	if n := execs.Load(); n != 2 {
		t.Errorf("executions = %d, want exactly 2", n)
	}
	if n := streamState(t, p.js, jetstream.StreamDLQ).Msgs; n != 0 {
		t.Errorf("TOOL_DLQ holds %d messages, want none", n)
	}
}

// Exercise 2: every attempt times out; after 3 attempts the call is
// answered with is_error and dead-lettered.
func TestSeedTimeoutsExhaustedToDLQ(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	p := newPool(t, hangingTool("search", &execs, func(int) bool { return true }))
	p.startWorker()

	b := toolUse("search", `{"q":"weather"}`)
	res := p.callBlock(b)

	if !res.IsError {
		t.Fatalf("result is not an error: %+v", res)
	}
	text := res.Content.Text()
	if !strings.Contains(text, "3 attempts") {
		t.Errorf("content does not say 3 attempts: %q", text)
	}
	if !strings.Contains(text, "search") {
		t.Errorf("content does not name the tool: %q", text)
	}
	assertModelSafe(t, text)
	if res.Class != envelope.ClassTransient || res.Code != classify.CodeTimeout || res.Attempts != 3 {
		t.Errorf("class, code, attempts = %q, %q, %d; want transient, timeout, 3", res.Class, res.Code, res.Attempts)
	}
	if n := execs.Load(); n != 3 {
		t.Errorf("executions = %d, want exactly 3", n)
	}

	msgs := streamMsgs(t, p.js, jetstream.StreamDLQ, "")
	if len(msgs) != 1 {
		t.Fatalf("TOOL_DLQ holds %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.Subject != jetstream.DLQSubject("search") {
		t.Errorf("dead letter subject = %q, want %q", m.Subject, jetstream.DLQSubject("search"))
	}
	for h, want := range map[string]string{
		nats.MsgIdHdr:         envelope.CallKey("", "", b.ID, b.Name, b.Input),
		settle.HeaderReason:   string(classify.FateExhausted),
		settle.HeaderTool:     "search",
		settle.HeaderCallID:   b.ID,
		settle.HeaderClass:    string(envelope.ClassTransient),
		settle.HeaderCode:     classify.CodeTimeout,
		settle.HeaderAttempts: "3",
	} {
		if got := m.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	e, err := settle.Decode(m.Data)
	if err != nil {
		t.Fatalf("settle.Decode: %v", err)
	}
	if e.Reason != classify.FateExhausted || e.CallID != b.ID || e.Tool != "search" {
		t.Errorf("entry reason, call id, tool = %q, %q, %q; want exhausted, %q, search", e.Reason, e.CallID, e.Tool, b.ID)
	}
	call, err := envelope.DecodeCall(e.Call, envelope.DefaultLimits)
	if err != nil {
		t.Fatalf("the dead letter's call does not decode: %v", err)
	}
	if call.ID != b.ID || string(call.Input) != string(b.Input) {
		t.Errorf("dead letter call id, input = %q, %s; want %q, %s", call.ID, call.Input, b.ID, b.Input)
	}
	if len(e.Attempts) == 0 {
		t.Fatal("dead letter records no attempt")
	}
	last := e.Attempts[len(e.Attempts)-1]
	if last.N != 3 || last.Class != envelope.ClassTransient || last.Code != classify.CodeTimeout {
		t.Errorf("last attempt n, class, code = %d, %q, %q; want 3, transient, timeout", last.N, last.Class, last.Code)
	}
	if e.LastFailure.IsZero() || e.LastFailure.Before(e.FirstFailure) {
		t.Errorf("failure times first=%v last=%v", e.FirstFailure, e.LastFailure)
	}
}

// Exercise 3: a file that does not exist is a permanent error: is_error at
// once after one execution, nothing dead-lettered.
func TestSeedFileNotFoundNotRetried(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var execs atomic.Int64
	readFile := tools.Tool{
		Name:        "read_file",
		Description: "reads a file of the workspace",
		InputSchema: objectSchema(`{"path":{"type":"string"}}`, "path"),
		Timeout:     2 * time.Second,
		Retry:       fastRetry,
		Handler: func(_ context.Context, input json.RawMessage) (tools.Output, error) {
			execs.Add(1)
			var in struct{ Path string }
			if err := json.Unmarshal(input, &in); err != nil {
				return tools.Output{}, err
			}
			f, err := os.Open(filepath.Join(dir, in.Path))
			if err != nil {
				return tools.Output{}, err
			}
			defer f.Close()
			return tools.Text("opened"), nil
		},
	}
	p := newPool(t, readFile)
	p.startWorker()

	res := p.call("read_file", `{"path":"notes/missing.txt"}`)

	if !res.IsError {
		t.Fatalf("result is not an error: %+v", res)
	}
	if res.Class != envelope.ClassPermanent || res.Code != classify.CodeNotFound || res.Attempts != 1 {
		t.Errorf("class, code, attempts = %q, %q, %d; want permanent, not_found, 1", res.Class, res.Code, res.Attempts)
	}
	text := res.Content.Text()
	if !strings.Contains(text, "not found") {
		t.Errorf("content does not say the file was not found: %q", text)
	}
	if strings.Contains(text, "attempt") {
		t.Errorf("content of an error that ran once talks about attempts: %q", text)
	}
	assertModelSafe(t, text, dir, "no such file")
	if n := execs.Load(); n != 1 {
		t.Errorf("executions = %d, want exactly 1", n)
	}
	if n := streamState(t, p.js, jetstream.StreamDLQ).Msgs; n != 0 {
		t.Errorf("TOOL_DLQ holds %d messages, want none", n)
	}
}
