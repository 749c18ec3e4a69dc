package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// benchTurns are one turn of three calls in each shape, as a whole
// message and as the bare array.
var benchTurns = []struct{ name, body string }{
	{"anthropic", `{"role":"assistant","content":[{"type":"text","text":"Let me look."},` +
		`{"type":"tool_use","id":"toolu_01","name":"echo","input":{"text":"a"}},` +
		`{"type":"tool_use","id":"toolu_02","name":"sleep","input":{"ms":10}},` +
		`{"type":"tool_use","id":"toolu_03","name":"echo","input":{"text":"c"}}]}`},
	{"anthropic-array", `[{"type":"tool_use","id":"toolu_01","name":"echo","input":{"text":"a"}},` +
		`{"type":"tool_use","id":"toolu_02","name":"sleep","input":{"ms":10}},` +
		`{"type":"tool_use","id":"toolu_03","name":"echo","input":{"text":"c"}}]`},
	{"openai", `{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"a\"}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"sleep","arguments":"{\"ms\":10}"}},` +
		`{"id":"call_3","type":"function","function":{"name":"echo","arguments":"{\"text\":\"c\"}"}}]}`},
	{"openai-array", `[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"a\"}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"sleep","arguments":"{\"ms\":10}"}},` +
		`{"id":"call_3","type":"function","function":{"name":"echo","arguments":"{\"text\":\"c\"}"}}]`},
	{"responses", `{"id":"resp_1","object":"response","status":"completed","output":[` +
		`{"type":"reasoning","id":"rs_1","summary":[]},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"text\":\"a\"}"},` +
		`{"type":"function_call","id":"fc_2","call_id":"call_2","name":"sleep","arguments":"{\"ms\":10}"},` +
		`{"type":"function_call","id":"fc_3","call_id":"call_3","name":"echo","arguments":"{\"text\":\"c\"}"}]}`},
	{"responses-array", `[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"text\":\"a\"}"},` +
		`{"type":"function_call","id":"fc_2","call_id":"call_2","name":"sleep","arguments":"{\"ms\":10}"},` +
		`{"type":"function_call","id":"fc_3","call_id":"call_3","name":"echo","arguments":"{\"text\":\"c\"}"}]`},
	{"gemini", `{"responseId":"r1","candidates":[{"content":{"role":"model","parts":[{"text":"Looking."},` +
		`{"functionCall":{"id":"g1","name":"echo","args":{"text":"a"}}},` +
		`{"functionCall":{"id":"g2","name":"sleep","args":{"ms":10}}},` +
		`{"functionCall":{"id":"g3","name":"echo","args":{"text":"c"}}}]}}]}`},
	{"gemini-array", `[{"functionCall":{"name":"echo","args":{"text":"a"}}},` +
		`{"functionCall":{"name":"sleep","args":{"ms":10}}},` +
		`{"functionCall":{"name":"echo","args":{"text":"c"}}}]`},
}

// BenchmarkParseTurn measures reading a POST /v1/tool_calls body, the
// shape detected from the body.
func BenchmarkParseTurn(b *testing.B) {
	for _, tc := range benchTurns {
		body := []byte(tc.body)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t, err := parseTurn(body, nil, MaxCallsDefault)
				if err != nil || len(t.calls) != 3 {
					b.Fatalf("%v %v", t, err)
				}
			}
		})
	}
}

// benchDispatcher answers every call with a short text, recording nothing.
type benchDispatcher struct{}

func (benchDispatcher) Dispatch(_ context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		out[i] = envelope.Result{V: envelope.Version, CallID: c.ID, Tool: c.Name, Content: envelope.Text("done")}
	}
	return out, nil
}

// BenchmarkToolCalls measures a whole POST /v1/tool_calls through the
// Handler: the checks, the parse, the dispatch and the answer in the
// request's shape.
func BenchmarkToolCalls(b *testing.B) {
	h := newTestHandler(b, &fakeDispatcher{}, func(c *Config) { c.Dispatcher = benchDispatcher{} })
	for _, tc := range benchTurns {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, PathToolCalls, strings.NewReader(tc.body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
