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
			refused(t, c.query, c.body, c.want, c.hdr...)
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

// A body of one format with ?format= naming another gets a 400 that says
// what that format expects and what the body looks like, not an empty
// answer (issue 12, finding 11; issue 15).
func TestFormatMismatchIsRefused(t *testing.T) {
	t.Parallel()
	responses := `[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"text\":\"x\"}"}]`
	cases := []struct{ name, query, body, expected, seen string }{
		{"responses items, format=openai", "?format=openai", responses, "OpenAI Chat Completions", "OpenAI Responses API output"},
		{"responses items, format=anthropic", "?format=anthropic", responses, "Anthropic Messages", "OpenAI Responses API output"},
		{"responses items, format=gemini", "?format=gemini", responses, "Gemini Content", "OpenAI Responses API output"},
		{"a whole response, format=openai", "?format=openai", `{"id":"resp_1","object":"response","output":[]}`, "OpenAI Chat Completions", "OpenAI Responses API response"},
		{"gemini content, format=responses", "?format=responses", `{"role":"model","parts":[{"functionCall":{"name":"echo","args":{"text":"x"}}}]}`, "OpenAI Responses API", "Gemini Content"},
		{"gemini response, format=anthropic", "?format=anthropic", `{"candidates":[{"content":{"role":"model","parts":[]}}]}`, "Anthropic Messages", "Gemini GenerateContentResponse"},
		{"gemini parts, format=openai", "?format=openai", `[{"text":"hi"},{"functionCall":{"name":"echo","args":{}}}]`, "OpenAI Chat Completions", "Gemini parts"},
		{"anthropic content, format=openai", "?format=openai", `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo"}]}`, "OpenAI Chat Completions", "Anthropic Messages"},
		{"anthropic blocks, format=gemini", "?format=gemini", `[{"type":"tool_use","id":"a","name":"echo"}]`, "Gemini", "Anthropic content blocks"},
		{"chat tool calls, format=responses", "?format=responses", `{"role":"assistant","tool_calls":[]}`, "OpenAI Responses API", "OpenAI Chat Completions"},
		{"chat tool call array, format=anthropic", "?format=anthropic", `[{"id":"c","type":"function","function":{"name":"echo"}}]`, "Anthropic Messages", "OpenAI Chat Completions tool calls"},
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
			expects, looks, ok := strings.Cut(e.Message, "; the body looks like ")
			if !ok || !strings.Contains(expects, c.expected) || !strings.Contains(looks, c.seen) || !strings.Contains(e.Message, "Drop ?format=") {
				t.Errorf("message %q; want one saying it expects %q and the body looks like %q", e.Message, c.expected, c.seen)
			}
			if n := len(f.dispatched()); n != 0 {
				t.Errorf("%d dispatches for a refused request", n)
			}
		})
	}
	// One item or one part alone is refused, whatever ?format= says: the
	// answer to it would not be what the agent appends.
	for body, want := range map[string]string{
		`{"type":"function_call","call_id":"call_1","name":"echo","arguments":"{}"}`: "one OpenAI Responses API item",
		`{"functionCall":{"name":"echo","args":{}}}`:                                 "one Gemini part",
	} {
		for _, q := range []string{"", "?format=responses", "?format=gemini"} {
			w := do(newTestHandler(t, &fakeDispatcher{}), "POST", "/v1/tool_calls"+q, body)
			if w.Code != http.StatusBadRequest || !strings.Contains(decodeError(t, w).Message, want) {
				t.Errorf("%s %s: status %d body %s; want 400 naming %q", q, body, w.Code, w.Body, want)
			}
		}
	}
}

// refused posts body with query and checks that it is refused with a 400
// invalid_request whose message holds want, and that nothing was
// dispatched.
func refused(t *testing.T, query, body, want string, hdr ...string) {
	t.Helper()
	f := &fakeDispatcher{}
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls"+query, body, hdr...)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400; body %.300s", w.Code, w.Body)
	}
	if e := decodeError(t, w); e.Type != ErrorInvalidRequest || !strings.Contains(e.Message, want) {
		t.Errorf("error %.300s; want a message with %q", e.Message, want)
	}
	if n := len(f.dispatched()); n != 0 {
		t.Errorf("%d dispatches for a refused request", n)
	}
}
