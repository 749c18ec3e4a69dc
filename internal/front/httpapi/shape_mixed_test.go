package httpapi

import (
	"errors"
	"strings"
	"testing"
)

// TestMixedShapesRefused: a body holding the calls of two model APIs was
// read in the first shape that claimed it, the others' calls silently
// left out. It is a 400 naming what the body mixes.
func TestMixedShapesRefused(t *testing.T) {
	t.Parallel()
	const (
		toolUse  = `{"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"a"}}`
		toolCall = `{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{}"}}`
		fnCall   = `{"type":"function_call","id":"fc_1","call_id":"call_2","name":"echo","arguments":"{}"}`
		part     = `{"functionCall":{"id":"g1","name":"echo","args":{}}}`
	)
	cases := []struct {
		name, body string
		want       []string // in the message
	}{
		{"anthropic content and openai tool_calls",
			`{"role":"assistant","content":[` + toolUse + `],"tool_calls":[` + toolCall + `]}`,
			[]string{`"content"`, `"tool_calls"`, "mixes formats"}},
		{"content, parts and output",
			`{"content":[` + toolUse + `],"parts":[` + part + `],"output":[` + fnCall + `]}`,
			[]string{`"content"`, `"parts"`, `"output"`}},
		{"tool_calls and output", `{"tool_calls":[` + toolCall + `],"output":[` + fnCall + `]}`,
			[]string{`"tool_calls"`, `"output"`}},
		{"candidates and parts", `{"candidates":[{"content":{"parts":[` + part + `]}}],"parts":[` + part + `]}`,
			[]string{`"candidates"`, `"parts"`}},
		{"array: tool_use then function_call", `[` + toolUse + `,` + fnCall + `]`,
			[]string{"the array", "Anthropic content blocks", "Responses"}},
		{"array: function_call then tool_use", `[` + fnCall + `,` + toolUse + `]`,
			[]string{"the array", "Responses", "Anthropic"}},
		{"array: tool call then tool_use", `[` + toolCall + `,` + toolUse + `]`,
			[]string{"the array", "Chat Completions", "Anthropic"}},
		{"array: part then tool_use", `[` + part + `,` + toolUse + `]`,
			[]string{"the array", "Gemini", "Anthropic"}},
		{"content holding a function_call", `{"role":"assistant","content":[` + toolUse + `,` + fnCall + `]}`,
			[]string{"content holds", "Anthropic", "Responses"}},
		{"output holding a tool_use", `{"object":"response","output":[` + fnCall + `,` + toolUse + `]}`,
			[]string{"output holds", "Anthropic"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			turn, err := parseTurn([]byte(tc.body), nil, MaxCallsDefault)
			var bad *badRequest
			if !errors.As(err, &bad) {
				n := -1
				if turn != nil {
					n = len(turn.calls)
				}
				t.Fatalf("parseTurn = %d calls, %v; want a 400 for the mixed body", n, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(bad.msg, w) {
					t.Errorf("message %q does not say %q", bad.msg, w)
				}
			}
		})
	}
}

// TestOneShapeStillRead: bodies of one model API that carry members of
// another shape's name without calls in them are read as before.
func TestOneShapeStillRead(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		format     Format
		calls      int
	}{
		{"openai with text content", `{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{}"}}]}`, FormatOpenAI, 1},
		{"openai with text parts", `{"role":"assistant","content":[{"type":"text","text":"hi"}],"tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{}"}}]}`, FormatOpenAI, 1},
		{"openai with null content", `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{}"}}]}`, FormatOpenAI, 1},
		{"anthropic with empty tool_calls", `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"echo","input":{}}],"tool_calls":[]}`, FormatAnthropic, 1},
		{"anthropic with null tool_calls", `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"echo","input":{}}],"tool_calls":null}`, FormatAnthropic, 1},
		{"gemini content with a text content member", `{"role":"model","content":"x","parts":[{"functionCall":{"name":"echo","args":{}}}]}`, FormatGemini, 1},
		{"anthropic array with text and thinking", `[{"type":"text","text":"a"},{"type":"thinking","thinking":"b"},{"type":"tool_use","id":"t1","name":"echo","input":{}}]`, FormatAnthropic, 1},
		{"responses with reasoning and message", `[{"type":"reasoning","id":"r","summary":[]},{"type":"message","role":"assistant","content":[]},{"type":"function_call","call_id":"c","name":"echo","arguments":"{}"}]`, FormatResponses, 1},
		{"gemini parts with text", `[{"text":"a"},{"functionCall":{"name":"echo","args":{}}}]`, FormatGemini, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			turn, err := parseTurn([]byte(tc.body), nil, MaxCallsDefault)
			if err != nil {
				t.Fatal(err)
			}
			if turn.shape.format() != tc.format || len(turn.calls) != tc.calls {
				t.Errorf("read as %s with %d calls; want %s with %d", turn.shape.format(), len(turn.calls), tc.format, tc.calls)
			}
		})
	}
}
