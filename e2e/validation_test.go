package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// countingTool is a tool that counts its executions and answers "done".
func countingTool(name string, schema json.RawMessage, execs *atomic.Int64) tools.Tool {
	return tools.Tool{
		Name:        name,
		Description: "counts its executions",
		InputSchema: schema,
		Timeout:     2 * time.Second,
		Retry:       fastRetry,
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
			execs.Add(1)
			return tools.Text("done"), nil
		},
	}
}

// An input that violates the tool's schema is answered with is_error naming
// every bad field, and the tool never runs.
func TestSchemaViolationNotExecuted(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {
			"path": {"type": "string"},
			"max_lines": {"type": "integer", "minimum": 1}
		},
		"required": ["path"],
		"additionalProperties": false
	}`)
	p := newPool(t, countingTool("read_file", schema, &execs))
	p.startWorker()

	tests := []struct {
		name   string
		input  string
		fields []string // each must be named in the content
	}{
		{name: "wrong type", input: `{"path": 7}`, fields: []string{"path"}},
		{name: "missing required", input: `{"max_lines": 10}`, fields: []string{"path"}},
		{name: "two bad fields", input: `{"path": ["a"], "max_lines": 0}`, fields: []string{"path", "max_lines"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := p.call("read_file", tt.input)
			if !res.IsError {
				t.Fatalf("result is not an error: %+v", res)
			}
			if res.Class != envelope.ClassValidation || res.Code != classify.CodeInvalidArgument || res.Retryable {
				t.Errorf("class, code, retryable = %q, %q, %v; want validation, invalid_argument, false", res.Class, res.Code, res.Retryable)
			}
			text := res.Content.Text()
			for _, f := range tt.fields {
				if !strings.Contains(text, f) {
					t.Errorf("content does not name the field %s: %q", f, text)
				}
			}
			assertModelSafe(t, text)
		})
	}
	if n := execs.Load(); n != 0 {
		t.Errorf("executions = %d, want 0", n)
	}
	if n := streamState(t, p.js, jetstream.StreamDLQ).Msgs; n != 0 {
		t.Errorf("TOOL_DLQ holds %d messages, want none", n)
	}
}

// A call to a tool no one serves is answered at once with is_error listing
// the tools, and nothing is published.
func TestUnknownToolNotPublished(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	p := newPool(t,
		countingTool("lookup", anySchema, &execs),
		countingTool("read_file", anySchema, &execs))
	p.startWorker()
	if res := p.call("lookup", `{}`); res.IsError {
		t.Fatalf("a call to a known tool failed: %+v", res)
	}
	// The worker acks after publishing the result: wait for the ack.
	eventually(t, "TOOL_CALLS to be empty", func() bool { return streamState(t, p.js, jetstream.StreamCalls).Msgs == 0 })
	before := streamState(t, p.js, jetstream.StreamCalls)

	res := p.call("nope", `{"x":1}`)

	if !res.IsError {
		t.Fatalf("result is not an error: %+v", res)
	}
	if res.Class != envelope.ClassValidation || res.Code != classify.CodeUnknownTool {
		t.Errorf("class, code = %q, %q; want validation, unknown_tool", res.Class, res.Code)
	}
	text := res.Content.Text()
	for _, want := range []string{"nope", "lookup", "read_file"} {
		if !strings.Contains(text, want) {
			t.Errorf("content does not mention %q: %q", want, text)
		}
	}
	after := streamState(t, p.js, jetstream.StreamCalls)
	if after.LastSeq != before.LastSeq || after.Msgs != before.Msgs {
		t.Errorf("TOOL_CALLS went from last seq %d, %d msgs to last seq %d, %d msgs; want unchanged",
			before.LastSeq, before.Msgs, after.LastSeq, after.Msgs)
	}
	if n := execs.Load(); n != 1 {
		t.Errorf("executions = %d, want 1 (the known tool's call only)", n)
	}
}

// A message on tools.call.<tool> that is not a valid call envelope is moved
// to TOOL_DLQ with reason malformed and its original bytes, and the worker
// keeps serving.
func TestMalformedCallsDeadLettered(t *testing.T) {
	t.Parallel()
	p := newPool(t, demo.Echo())
	p.startWorker()

	tests := []struct {
		name string
		data string
	}{
		{name: "not JSON", data: `this is not json {`},
		{name: "JSON without id", data: `{"v":1,"tool":"echo","input":{"text":"x"}}`},
		{name: "version 2", data: `{"v":2,"id":"toolu_from_the_future","tool":"echo","input":{"text":"x"}}`},
		{name: "version 2, hand-formatted", data: "{\n  \"v\": 2,\n  \"id\": \"toolu_pretty\",\n  \"tool\": \"echo\",\n  \"input\": {\"text\": \"x\"}\n}\n"},
		{name: "tool not matching the subject", data: `{"v":1,"id":"toolu_misrouted","tool":"sleep","input":{"ms":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ack, err := p.js.Publish(ctx, jetstream.CallSubject("echo"), []byte(tt.data))
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
			m := waitDeadLetter(t, p.js, func(e *settle.Entry) bool { return e.SourceSeq == ack.Sequence })
			if got := m.Header.Get(settle.HeaderReason); got != string(classify.FateMalformed) {
				t.Errorf("header %s = %q, want %q", settle.HeaderReason, got, classify.FateMalformed)
			}
			if got := m.Header.Get(settle.HeaderTool); got != "echo" {
				t.Errorf("header %s = %q, want echo", settle.HeaderTool, got)
			}
			if m.Subject != jetstream.DLQSubject("echo") {
				t.Errorf("subject = %q, want %q", m.Subject, jetstream.DLQSubject("echo"))
			}
			e, err := settle.Decode(m.Data)
			if err != nil {
				t.Fatalf("settle.Decode: %v", err)
			}
			if e.Reason != classify.FateMalformed || e.Tool != "echo" || e.Error == "" {
				t.Errorf("entry reason, tool, error = %q, %q, %q; want malformed, echo and a reason", e.Reason, e.Tool, e.Error)
			}
			original := e.RawCall
			if len(original) == 0 {
				original = e.Call
			}
			if !bytes.Equal(original, []byte(tt.data)) {
				t.Errorf("dead letter keeps %q, want the original bytes %q", original, tt.data)
			}

			// The worker is still serving.
			if res := p.call("echo", `{"text":"still here"}`); res.IsError || res.Content.Text() != "still here" {
				t.Errorf("echo after the malformed message: %+v", res)
			}
		})
	}
	eventually(t, "TOOL_CALLS to be empty", func() bool { return streamState(t, p.js, jetstream.StreamCalls).Msgs == 0 })
}

// waitDeadLetter waits for a message in TOOL_DLQ whose entry matches.
func waitDeadLetter(t *testing.T, j js.JetStream, match func(*settle.Entry) bool) *js.RawStreamMsg {
	t.Helper()
	var found *js.RawStreamMsg
	eventually(t, "the dead letter", func() bool {
		for _, m := range streamMsgs(t, j, jetstream.StreamDLQ, "") {
			if e, err := settle.Decode(m.Data); err == nil && match(e) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// A tool that panics is answered with an internal is_error that shows
// nothing of the panic, and the same worker serves the next call.
func TestPanicAnsweredAndWorkerSurvives(t *testing.T) {
	t.Parallel()
	var execs atomic.Int64
	crash := tools.Tool{
		Name:        "crash",
		Description: "writes to a nil map",
		InputSchema: anySchema,
		Timeout:     2 * time.Second,
		Retry:       fastRetry,
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
			execs.Add(1)
			var m map[string]int
			m["db.internal.example:5432"]++
			return tools.Text("unreachable"), nil
		},
	}
	p := newPool(t, crash, demo.Echo(), demo.Flaky())
	p.startWorker(func(c *worker.Config) { c.Concurrency = 1 })

	tests := []struct {
		name, tool, input string
		hidden            []string
	}{
		{name: "runtime panic", tool: "crash", input: `{}`, hidden: []string{"nil map", "db.internal.example"}},
		{name: "flaky panic", tool: "flaky", input: `{"fail":"panic","times":1}`, hidden: []string{"simulated panic", "flaky:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := p.call(tt.tool, tt.input)
			if !res.IsError {
				t.Fatalf("result is not an error: %+v", res)
			}
			if res.Class != envelope.ClassInternal || res.Code != classify.CodePanic || res.Attempts != 1 {
				t.Errorf("class, code, attempts = %q, %q, %d; want internal, panic, 1", res.Class, res.Code, res.Attempts)
			}
			text := res.Content.Text()
			if !strings.Contains(text, tt.tool) {
				t.Errorf("content does not name the tool: %q", text)
			}
			assertModelSafe(t, text, append(tt.hidden, "panic:")...)

			if res := p.call("echo", `{"text":"after"}`); res.IsError || res.Content.Text() != "after" {
				t.Errorf("echo on the same worker after the panic: %+v", res)
			}
		})
	}
	if n := execs.Load(); n != 1 {
		t.Errorf("the panicking tool ran %d times, want 1 (not retried)", n)
	}
	if n := streamState(t, p.js, jetstream.StreamDLQ).Msgs; n != 0 {
		t.Errorf("TOOL_DLQ holds %d messages, want none", n)
	}
}
