package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// A whole Responses API response: its function_call items run keyed by
// call_id, the other items are skipped, and the answer is one
// function_call_output per call in their order, errors prefixed as in
// Chat Completions tool messages.
func TestResponsesShape(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{}
	body := `{"id":"resp_1","object":"response","status":"completed","output_text":"",
		"output":[
			{"type":"reasoning","id":"rs_1","summary":[]},
			{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Calling."}]},
			{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"text\":\"a\"}","status":"completed"},
			{"type":"web_search_call","id":"ws_1","status":"completed"},
			{"type":"function_call","id":"fc_2","call_id":"call_2","name":"fail","arguments":"{}"},
			{"type":"function_call","id":"fc_3","call_id":"call_3","name":"echo","arguments":"{\"text\": oops}"},
			{"type":"custom_tool_call","id":"ctc_1","call_id":"call_4","name":"grep","input":"x"},
			{"type":"function_call","call_id":"call_5","name":"echo","arguments":""}
		]}`
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls", body, HeaderSession, "r-1")
	if w.Code != http.StatusOK || w.Header().Get(HeaderFormat) != "responses" {
		t.Fatalf("status %d format %q body %s", w.Code, w.Header().Get(HeaderFormat), w.Body)
	}
	var out []FunctionCallOutput
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	want := []struct{ typ, id, prefix string }{
		{"function_call_output", "call_1", `echo:{"text":"a"}`},
		{"function_call_output", "call_2", "Error: The tool fail failed on purpose."},
		{"function_call_output", "call_3", "Error: The arguments of this call to echo are not valid JSON"},
		{"custom_tool_call_output", "call_4", `Error: This tool call is of type "custom"`},
		{"function_call_output", "call_5", "echo:{}"},
	}
	if len(out) != len(want) {
		t.Fatalf("answer %s; want %d items", w.Body, len(want))
	}
	for i, wnt := range want {
		if out[i].Type != wnt.typ || out[i].CallID != wnt.id || !strings.HasPrefix(out[i].Output, wnt.prefix) {
			t.Errorf("[%d] = %+v; want %s %s %q…", i, out[i], wnt.typ, wnt.id, wnt.prefix)
		}
	}
	if got := w.Header().Get(HeaderErrorIndexes); got != "1,2,3" {
		t.Errorf("%s = %q, want 1,2,3", HeaderErrorIndexes, got)
	}
	calls := f.dispatched()
	if len(calls) != 1 || len(calls[0]) != 3 {
		t.Fatalf("dispatched %v; want the 3 runnable calls in one turn", calls)
	}
	for i, id := range []string{"call_1", "call_2", "call_5"} {
		if calls[0][i].ID != id {
			t.Errorf("dispatched[%d].ID = %q, want %q (the call_id, not the item id)", i, calls[0][i].ID, id)
		}
	}
	// The bare output array is read the same way; a function_call whose
	// output is in the same array (the agent posted its whole input list)
	// was answered before and is not answered again.
	w = do(newTestHandler(t, &fakeDispatcher{}), "POST", "/v1/tool_calls", `[
		{"type":"message","role":"user","content":"hi"},
		{"type":"function_call","call_id":"call_1","name":"echo","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_1","output":"done before"},
		{"type":"function_call","call_id":"call_2","name":"echo","arguments":{"text":"b"}}]`)
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != `[{"type":"function_call_output","call_id":"call_2","output":"echo:{\"text\":\"b\"}"}]` {
		t.Errorf("status %d body %s", w.Code, got)
	}
}

// Gemini content: functionCall parts run; a call with an id is answered
// with it, one without is answered without and keyed by its position in
// the turn; results go under response.output, errors under
// response.error.
func TestGeminiShape(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{}
	body := `{"responseId":"r3sp0nse","modelVersion":"gemini-2.5-flash",
		"candidates":[{"index":0,"finishReason":"STOP","content":{"role":"model","parts":[
			{"text":"Calling.","thought":true},
			{"functionCall":{"id":"g-1","name":"echo","args":{"text":"a"}},"thoughtSignature":"c2ln"},
			{"functionCall":{"name":"fail","args":{}}},
			{"functionCall":{"name":"echo"}}
		]}}],
		"usageMetadata":{"totalTokenCount":3}}`
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls", body)
	if w.Code != http.StatusOK || w.Header().Get(HeaderFormat) != "gemini" {
		t.Fatalf("status %d format %q body %s", w.Code, w.Header().Get(HeaderFormat), w.Body)
	}
	want := `{"role":"user","parts":[` +
		`{"functionResponse":{"id":"g-1","name":"echo","response":{"output":"echo:{\"text\":\"a\"}"}}},` +
		`{"functionResponse":{"name":"fail","response":{"error":"The tool fail failed on purpose."}}},` +
		`{"functionResponse":{"name":"echo","response":{"output":"echo:{}"}}}]}`
	if got := strings.TrimSpace(w.Body.String()); got != want {
		t.Errorf("answer\n%s\nwant\n%s", got, want)
	}
	if got := w.Header().Get(HeaderErrorIndexes); got != "1" {
		t.Errorf("%s = %q, want 1", HeaderErrorIndexes, got)
	}
	calls := f.dispatched()
	if len(calls) != 1 || len(calls[0]) != 3 {
		t.Fatalf("dispatched %v", calls)
	}
	for i, id := range []string{"g-1", "gemini:r3sp0nse:2", "gemini:r3sp0nse:3"} {
		if calls[0][i].ID != id {
			t.Errorf("dispatched[%d].ID = %q, want %q", i, calls[0][i].ID, id)
		}
	}

	// Without a responseId the turn is named by its parts: the same content
	// again (a retry) is the same calls, another content other calls.
	keys := func(body string) []string {
		t.Helper()
		f := &fakeDispatcher{}
		if w := do(newTestHandler(t, f), "POST", "/v1/tool_calls", body); w.Code != 200 {
			t.Fatalf("status %d body %s", w.Code, w.Body)
		}
		var ids []string
		for _, c := range f.dispatched()[0] {
			if checkID(c.ID) != "" {
				t.Errorf("key %q is not a valid id", c.ID)
			}
			ids = append(ids, c.ID)
		}
		return ids
	}
	content := `{"role":"model","parts":[{"functionCall":{"name":"echo","args":{"text":"a","n":1}}},{"functionCall":{"name":"echo","args":{}}}]}`
	first := keys(content)
	again := keys(`{"parts":[{"functionCall":{"args":{"n":1, "text":"a"},"name":"echo"}},{"functionCall":{"name":"echo","args":{}}}],"role":"model"}`)
	other := keys(`{"role":"model","parts":[{"functionCall":{"name":"echo","args":{"text":"b","n":1}}},{"functionCall":{"name":"echo","args":{}}}]}`)
	bare := keys(`[{"functionCall":{"name":"echo","args":{"text":"a","n":1}}},{"functionCall":{"name":"echo","args":{}}}]`)
	if len(first) != 2 || first[0] == first[1] || !strings.HasPrefix(first[0], "gemini:") || !strings.HasSuffix(first[1], ":1") {
		t.Fatalf("keys %v", first)
	}
	if strings.Join(again, ",") != strings.Join(first, ",") || strings.Join(bare, ",") != strings.Join(first, ",") {
		t.Errorf("the same parts got keys %v and %v and %v", first, again, bare)
	}
	if other[1] == first[1] {
		t.Errorf("another turn's call got the key %q of the first turn's", other[1])
	}
}

// A message without calls gets the empty answer of its format.
func TestNewShapesWithoutCalls(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, want, format string }{
		{"responses text only", `{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}]}`, `[]`, "responses"},
		{"responses empty output", `{"object":"response","output":[]}`, `[]`, "responses"},
		{"gemini text only", `{"role":"model","parts":[{"text":"Done."}]}`, `{"role":"user","parts":[]}`, "gemini"},
		{"gemini no parts", `{"role":"model","parts":null}`, `{"role":"user","parts":[]}`, "gemini"},
		{"gemini blocked candidate", `{"candidates":[{"finishReason":"SAFETY"}]}`, `{"role":"user","parts":[]}`, "gemini"},
		{"forced gemini on an empty array", `[]`, `{"role":"user","parts":[]}`, "gemini"},
		{"forced responses on an empty array", `[]`, `[]`, "responses"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q := ""
			if strings.HasPrefix(c.name, "forced") {
				q = "?format=" + c.format
			}
			w := do(newTestHandler(t, &fakeDispatcher{}), "POST", "/v1/tool_calls"+q, c.body)
			if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != c.want || w.Header().Get(HeaderFormat) != c.format {
				t.Errorf("status %d format %q body %s; want 200 %s %s", w.Code, w.Header().Get(HeaderFormat), got, c.format, c.want)
			}
		})
	}
}

// Bad Responses and Gemini bodies get a 400 naming the field.
func TestNewShapesBadRequests(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300)
	cases := []struct{ name, query, body, want string }{
		{"output not an array", "", `{"object":"response","output":{}}`, "output: must be an array of Responses API items, not a JSON object"},
		{"forced responses without output", "?format=responses", `{"role":"assistant","content":"x"}`, "output: missing"},
		{"item not an object", "?format=responses", `[{"type":"function_call","call_id":"c","name":"echo"},7]`, "[1]: must be a Responses API item object, not a JSON number"},
		{"item without type", "", `{"output":[{"call_id":"c","name":"echo"}]}`, "output[0].type: missing"},
		{"function_call without call_id", "", `{"output":[{"type":"function_call","id":"fc_1","name":"echo","arguments":"{}"}]}`, "output[0].call_id: missing"},
		{"function_call with empty call_id", "", `[{"type":"function_call","call_id":"","name":"echo"}]`, "[0].call_id: is empty"},
		{"function_call without name", "", `[{"type":"function_call","call_id":"c"}]`, "[0].name: missing"},
		{"function_call name not a string", "", `[{"type":"function_call","call_id":"c","name":["echo"]}]`, "[0].name: must be a string, not a JSON array"},
		{"arguments a number", "", `[{"type":"function_call","call_id":"c","name":"echo","arguments":12}]`, "[0].arguments: must be a JSON object encoded as a string, not a JSON number"},
		{"duplicate call_id", "", `[{"type":"function_call","call_id":"c","name":"echo"},{"type":"function_call","call_id":"c","name":"echo"}]`, `[1].call_id: "c" is also the call_id of [0]`},
		{"call_id with a space", "", `[{"type":"function_call","call_id":"call 1","name":"echo"}]`, "[0].call_id: has the character ' '"},
		{"long call_id", "", `[{"type":"function_call","call_id":"` + long + `","name":"echo"}]`, "[0].call_id: is 300 bytes; the limit is 256"},
		{"candidates not an array", "", `{"candidates":{}}`, "candidates: must be an array"},
		{"no candidates", "", `{"candidates":[]}`, "candidates: is empty"},
		{"candidate content not an object", "", `{"candidates":[{"content":"x"}]}`, "candidates[0].content: must be a Content object"},
		{"user content", "", `{"role":"user","parts":[{"text":"hi"}]}`, `role: is "user"`},
		{"role not a string", "", `{"role":1,"parts":[]}`, "role: must be a string"},
		{"parts not an array", "", `{"role":"model","parts":{"functionCall":{}}}`, "parts: must be an array of parts, not a JSON object"},
		{"part not an object", "", `{"role":"model","parts":["text"]}`, "parts[0]: must be a Gemini part object, not a JSON string"},
		{"functionCall not an object", "", `{"role":"model","parts":[{"functionCall":"echo"}]}`, "parts[0].functionCall: must be an object"},
		{"functionCall without name", "", `{"candidates":[{"content":{"role":"model","parts":[{"text":"x"},{"functionCall":{"args":{}}}]}}]}`, "candidates[0].content.parts[1].functionCall.name: missing"},
		{"args not an object", "", `{"role":"model","parts":[{"functionCall":{"name":"echo","args":"{}"}}]}`, "parts[0].functionCall.args: must be an object, not a JSON string"},
		{"id not a string", "", `{"role":"model","parts":[{"functionCall":{"name":"echo","id":5}}]}`, "parts[0].functionCall.id: must be a string"},
		{"empty id", "", `{"role":"model","parts":[{"functionCall":{"name":"echo","id":""}}]}`, "parts[0].functionCall.id: is empty"},
		{"id with a newline", "", `{"role":"model","parts":[{"functionCall":{"name":"echo","id":"a\nb"}}]}`, "parts[0].functionCall.id: has the character '\\n'"},
		{"duplicate functionCall ids", "", `[{"functionCall":{"name":"echo","id":"g"}},{"functionCall":{"name":"echo","id":"g"}}]`, `[1].functionCall.id: "g" is also the id of [0]`},
		{"long function name", "", `[{"functionCall":{"name":"` + long + `"}}]`, "[0].functionCall.name: is 300 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			refused(t, c.query, c.body, c.want)
		})
	}
	// More calls than the limit, in both shapes.
	h := newTestHandler(t, &fakeDispatcher{}, func(c *Config) { c.MaxCalls = 2 })
	for _, body := range []string{
		`[{"type":"function_call","call_id":"a","name":"e"},{"type":"function_call","call_id":"b","name":"e"},{"type":"function_call","call_id":"c","name":"e"}]`,
		`{"role":"model","parts":[{"functionCall":{"name":"e"}},{"functionCall":{"name":"e"}},{"functionCall":{"name":"e"}}]}`,
	} {
		w := do(h, "POST", "/v1/tool_calls", body)
		if w.Code != http.StatusBadRequest || !strings.Contains(decodeError(t, w).Message, "more than 2 tool calls") {
			t.Errorf("status %d body %s; want 400 naming the limit", w.Code, w.Body)
		}
	}
}

// GET /v1/tools in the Responses and Gemini shapes.
func TestToolsNewFormats(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t, &fakeDispatcher{})
	w := do(h, "GET", "/v1/tools?format=responses", "")
	var rt []ResponsesTool
	if err := json.Unmarshal(w.Body.Bytes(), &rt); err != nil || w.Code != 200 || len(rt) != 2 {
		t.Fatalf("status %d body %s: %v", w.Code, w.Body, err)
	}
	if rt[0].Type != "function" || rt[0].Name != "echo" || rt[0].Description != "Echoes." || rt[0].Strict ||
		string(rt[0].Parameters) != string(testDefs[1].InputSchema) || !strings.Contains(w.Body.String(), `"strict":false`) {
		t.Errorf("responses tools %s", w.Body)
	}
	w = do(h, "GET", "/v1/tools?format=gemini", "")
	var gt []GeminiTool
	if err := json.Unmarshal(w.Body.Bytes(), &gt); err != nil || w.Code != 200 || len(gt) != 1 || len(gt[0].FunctionDeclarations) != 2 {
		t.Fatalf("status %d body %s: %v", w.Code, w.Body, err)
	}
	if d := gt[0].FunctionDeclarations[1]; d.Name != "sleep" || d.Description != "Waits." || string(d.ParametersJSONSchema) != string(testDefs[0].InputSchema) {
		t.Errorf("gemini declaration %+v", d)
	}
	none := newTestHandler(t, &fakeDispatcher{}, func(c *Config) {
		c.Definitions = DefinitionsFunc(func(context.Context) ([]tools.Definition, error) { return nil, nil })
	})
	for q, want := range map[string]string{"responses": "[]", "gemini": "[]"} {
		if w := do(none, "GET", "/v1/tools?format="+q, ""); strings.TrimSpace(w.Body.String()) != want {
			t.Errorf("%s with no tools: %d %s; want %s", q, w.Code, w.Body, want)
		}
	}
}

// The answer of each shape to a non-text block names it.
func TestNewShapesNameOtherBlocks(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{answer: func(c envelope.ToolUseBlock) envelope.Result {
		return envelope.Result{V: 1, CallID: c.ID, Tool: c.Name, Content: envelope.Content{
			{Type: "text", Text: "a chart:"}, {Type: "image", Raw: json.RawMessage(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}`)}}}
	}}
	h := newTestHandler(t, f)
	w := do(h, "POST", "/v1/tool_calls", `[{"type":"function_call","call_id":"c","name":"echo"}]`)
	if !strings.Contains(w.Body.String(), `"a chart:\n[image block omitted: function_call_output items carry text only]"`) {
		t.Errorf("responses answer %s", w.Body)
	}
	w = do(h, "POST", "/v1/tool_calls", `[{"functionCall":{"name":"echo"}}]`)
	if !strings.Contains(w.Body.String(), `"a chart:\n[image block omitted: Gemini function responses carry text only]"`) {
		t.Errorf("gemini answer %s", w.Body)
	}
}

// A saturated pool's 429 answers in the new shapes too: every call an
// error the model reads in that shape's convention.
func TestNewShapesSaturated(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{err: &dispatch.SaturatedError{Load: 10, Limit: 10, RetryAfter: 2 * time.Second}}
	h := newTestHandler(t, f)
	w := do(h, "POST", "/v1/tool_calls", `[{"type":"function_call","call_id":"c1","name":"echo","arguments":"{}"}]`)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" ||
		!strings.Contains(w.Body.String(), `"call_id":"c1","output":"Error: The call to echo was not run: the tool pool is saturated`) {
		t.Errorf("responses: %d %s", w.Code, w.Body)
	}
	w = do(h, "POST", "/v1/tool_calls", `{"role":"model","parts":[{"functionCall":{"name":"echo","args":{}}}]}`)
	if w.Code != http.StatusTooManyRequests || w.Header().Get(HeaderErrorIndexes) != "0" ||
		!strings.Contains(w.Body.String(), `"response":{"error":"The call to echo was not run: the tool pool is saturated`) {
		t.Errorf("gemini: %d %s", w.Code, w.Body)
	}
}
