package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzToolCalls: no body, query or session header makes the handler panic
// or answer 500, every 200 is a well-formed answer in the format it names
// (all four), and every id it answers passed the boundary's checks.
func FuzzToolCalls(f *testing.F) {
	seeds := []struct{ query, body string }{
		{"", `{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"a","name":"echo","input":{"text":"x"}}]}`},
		{"", `[{"type":"tool_use","id":"a","name":"fail","input":{}},{"type":"tool_use","id":"b","name":"echo"}]`},
		{"", `{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"echo","arguments":"{\"a\":1}"}}]}`},
		{"?format=openai", `[{"id":"c","function":{"name":"echo","arguments":"{"}},{"id":"d","type":"custom","custom":{"name":"x"}}]`},
		{"?format=anthropic&timeout=1.5", `{"content":"text only"}`},
		{"?session=s&timeout=3s", `{"role":"assistant","content":[]}`},
		{"", `{"tool_calls":[{"id":"e","function":{"name":"echo","arguments":[1,2]}}]}`},
		{"", `{"choices":[]}`},
		{"", `[1, "x", null]`},
		{"", "\xff\xfe{}"},
		{"?timeout=1e400", `[]`},
		{"", `[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{}"}]`},
		{"?format=openai", `{"object":"response","output":[]}`},
		{"", `{"role":"model","parts":[{"functionCall":{"name":"echo"}}]}`},
		{"", `[{"type":"tool_use","id":"toolu 1","name":"echo"}]`},
		{"", `[{"type":"tool_use","id":"\u00e9","name":"echo"}]`},
		{"", `{"object":"response","output":[{"type":"reasoning","summary":[]},{"type":"function_call","call_id":"call_2","name":"fail","arguments":"{\"a\""},{"type":"custom_tool_call","call_id":"c3","name":"g","input":"x"}]}`},
		{"?format=responses", `[{"type":"function_call","call_id":"call_1","name":"echo"},{"type":"function_call_output","call_id":"call_1","output":"x"},{"type":"function_call","call_id":"call_9","name":"echo","arguments":7}]`},
		{"", `{"responseId":"r1","candidates":[{"content":{"role":"model","parts":[{"text":"t","thought":true},{"functionCall":{"id":"g1","name":"echo","args":{"text":"x"}}},{"functionCall":{"name":"fail"}}]}}]}`},
		{"?format=gemini", `[{"functionCall":{"name":"echo","args":[]}},{"functionCall":{"name":"echo","id":""}}]`},
		{"", `{"candidates":[{"finishReason":"SAFETY"}],"promptFeedback":{}}`},
		{"?format=gemini", `{"role":"model","parts":[{"functionCall":{"name":"echo","args":{"n":1e999}}}]}`},
		{"?format=anthropic", `{"role":"model","parts":[{"functionCall":{"name":"echo"}}]}`},
		{"?format=responses", `{"role":"assistant","content":"x"}`},
	}
	for i, s := range seeds {
		session := ""
		if i%3 == 1 {
			session = "sess-" + strings.Repeat("x", i*40)
		}
		f.Add(s.query, s.body, session)
	}
	h := newTestHandler(f, &fakeDispatcher{}, func(c *Config) { c.MaxBodyBytes = 64 << 10; c.MaxCalls = 64 })
	f.Fuzz(func(t *testing.T, query, body, session string) {
		target := "/v1/tool_calls"
		if query != "" {
			if !strings.HasPrefix(query, "?") {
				query = "?" + query
			}
			target += query
		}
		r, err := http.NewRequest("POST", "http://x"+target, strings.NewReader(body))
		if err != nil {
			return // not a URL a client could send
		}
		r.Header.Set("Content-Type", "application/json")
		if session != "" {
			r.Header[HeaderSession] = []string{session}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var e ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("error answer %q: %v", w.Body, err)
			}
			return
		default:
			t.Fatalf("status %d for query %q body %q: %s", w.Code, query, body, w.Body)
		}
		switch Format(w.Header().Get(HeaderFormat)) {
		case FormatAnthropic:
			var msg UserMessage
			if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil || msg.Role != "user" || msg.Content == nil {
				t.Fatalf("anthropic answer %q: %v", w.Body, err)
			}
			for _, b := range msg.Content {
				if b.Type != "tool_result" || b.ToolUseID == "" || checkID(b.ToolUseID) != "" {
					t.Fatalf("block %+v in %q", b, w.Body)
				}
			}
		case FormatOpenAI:
			var msgs []ToolMessage
			if err := json.Unmarshal(w.Body.Bytes(), &msgs); err != nil || msgs == nil {
				t.Fatalf("openai answer %q: %v", w.Body, err)
			}
			for _, m := range msgs {
				if m.Role != "tool" || m.ToolCallID == "" || checkID(m.ToolCallID) != "" {
					t.Fatalf("message %+v in %q", m, w.Body)
				}
			}
		case FormatResponses:
			var items []FunctionCallOutput
			if err := json.Unmarshal(w.Body.Bytes(), &items); err != nil || items == nil {
				t.Fatalf("responses answer %q: %v", w.Body, err)
			}
			for _, it := range items {
				if !strings.HasSuffix(it.Type, "_call_output") || it.CallID == "" || checkID(it.CallID) != "" {
					t.Fatalf("item %+v in %q", it, w.Body)
				}
			}
		case FormatGemini:
			var c GeminiContent
			if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || c.Role != "user" || c.Parts == nil {
				t.Fatalf("gemini answer %q: %v", w.Body, err)
			}
			for _, p := range c.Parts {
				fr := p.FunctionResponse
				if fr.Name == "" || checkID(fr.ID) != "" && fr.ID != "" || (fr.Response.Output == nil) == (fr.Response.Error == nil) {
					t.Fatalf("part %+v in %q", p, w.Body)
				}
			}
		default:
			t.Fatalf("200 without a format: %q", w.Body)
		}
	})
}
