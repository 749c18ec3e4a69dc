package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// Ids and the session are checked at the boundary: a 400 that names the
// field, never a 503 that invites a retry (issue 12, finding 10).
func TestIDsAreCheckedAtTheBoundary(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100_000)
	cases := []struct {
		name, query, body string
		hdr               []string
		want              string
	}{
		{"long tool_use id", "", `{"role":"assistant","content":[{"type":"tool_use","id":"` + long + `","name":"echo","input":{}}]}`, nil, "content[0].id: is 100000 bytes; the limit is 256"},
		{"id with a space", "", `[{"type":"tool_use","id":"toolu 1","name":"echo"}]`, nil, "[0].id: has the character ' '"},
		{"id with a control character", "", `[{"type":"tool_use","id":"a\u0001","name":"echo"}]`, nil, "[0].id: has the character"},
		{"id not ASCII", "", `[{"type":"tool_use","id":"toolu_é","name":"echo"}]`, nil, "[0].id: has the character"},
		{"long openai id", "", `{"tool_calls":[{"id":"` + long + `","type":"function","function":{"name":"echo","arguments":"{}"}}]}`, nil, "tool_calls[0].id: is 100000 bytes"},
		{"long tool name", "", `[{"type":"tool_use","id":"a","name":"` + long + `"}]`, nil, "[0].name: is 100000 bytes"},
		{"long function name", "", `{"tool_calls":[{"id":"c","function":{"name":"` + long + `"}}]}`, nil, "tool_calls[0].function.name: is 100000 bytes"},
		{"long session header", "", `[]`, []string{HeaderSession, strings.Repeat("s", 300)}, "Toolpool-Session header is 300 bytes; the limit is 256"},
		{"session header with a space", "", `[]`, []string{HeaderSession, "my session"}, "Toolpool-Session header has the character ' '"},
		{"session parameter with a newline", "?session=a%0Ab", `[]`, nil, "session parameter has the character '\\n'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeDispatcher{}
			w := do(newTestHandler(t, f), "POST", "/v1/tool_calls"+c.query, c.body, c.hdr...)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %.300s", w.Code, w.Body)
			}
			if e := decodeError(t, w); e.Type != ErrorInvalidRequest || !strings.Contains(e.Message, c.want) {
				t.Errorf("error %.300s; want a message with %q", e.Message, c.want)
			}
			if n := len(f.dispatched()); n != 0 {
				t.Errorf("%d dispatches for a refused request", n)
			}
		})
	}
	// The ids the model APIs make pass.
	f := &fakeDispatcher{}
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls", `[
		{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"echo"},
		{"type":"tool_use","id":"call_abc123XYZ","name":"echo"},
		{"type":"tool_use","id":"fc_67ca09c5efe0819096d0511c92b8c890","name":"echo"},
		{"type":"tool_use","id":"`+strings.Repeat("a", 256)+`","name":"echo"}]`,
		HeaderSession, "9b2f7c1e-5a4d-4e3b-8f6a-0c1d2e3f4a5b")
	if w.Code != http.StatusOK {
		t.Errorf("status %d for well-formed ids: %s", w.Code, w.Body)
	}
}

// A body of an API this one does not speak gets a 400 that says what it
// expected, not 200 with an empty answer (issue 12, finding 11).
func TestOtherAPIsAreRefused(t *testing.T) {
	t.Parallel()
	responses := `[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"text\":\"x\"}"}]`
	cases := []struct{ name, query, body, want string }{
		{"responses items", "", responses, "OpenAI Responses API"},
		{"responses items, format=openai", "?format=openai", responses, "OpenAI Responses API"},
		{"responses items, format=anthropic", "?format=anthropic", responses, "OpenAI Responses API"},
		{"responses items after a reasoning item", "", `[{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","call_id":"call_1","name":"echo","arguments":"{}"}]`, "OpenAI Responses API"},
		{"one responses item", "", `{"type":"function_call","call_id":"call_1","name":"echo","arguments":"{}"}`, "OpenAI Responses API"},
		{"a whole response", "", `{"id":"resp_1","object":"response","output":[{"type":"function_call","call_id":"call_1","name":"echo","arguments":"{}"}]}`, "OpenAI Responses API response"},
		{"gemini content", "", `{"role":"model","parts":[{"functionCall":{"name":"echo","args":{"text":"x"}}}]}`, "Gemini"},
		{"gemini parts", "", `[{"functionCall":{"name":"echo","args":{}}}]`, "Gemini"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeDispatcher{}
			w := do(newTestHandler(t, f), "POST", "/v1/tool_calls"+c.query, c.body)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %s", w.Code, w.Body)
			}
			e := decodeError(t, w)
			if !strings.Contains(e.Message, c.want) || !strings.Contains(e.Message, "not support") ||
				!strings.Contains(e.Message, "Chat Completions") || !strings.Contains(e.Message, "Anthropic Messages") {
				t.Errorf("message %q; want one naming %q, that it is not supported and the formats accepted", e.Message, c.want)
			}
			if strings.Contains(e.Message, "fc_1") {
				t.Errorf("message %q names the item's id", e.Message)
			}
		})
	}
}
