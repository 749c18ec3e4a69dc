package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeDispatcher answers each call with the text "<tool>:<input>", an
// is_error for the tool "fail", and records what it was given.
type fakeDispatcher struct {
	mu       sync.Mutex
	sessions []string
	calls    [][]envelope.ToolUseBlock
	traces   []string
	err      error                                       // returned instead of results
	block    bool                                        // wait for ctx instead of answering
	deadline func(d time.Time, ok bool)                  // sees the ctx deadline
	answer   func(envelope.ToolUseBlock) envelope.Result // overrides the default answer
}

func (f *fakeDispatcher) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	f.mu.Lock()
	f.sessions = append(f.sessions, session)
	f.calls = append(f.calls, calls)
	tp, _ := dispatch.TraceparentFrom(ctx)
	f.traces = append(f.traces, tp)
	f.mu.Unlock()
	if f.deadline != nil {
		f.deadline(ctx.Deadline())
	}
	if f.block {
		<-ctx.Done()
		return nil, fmt.Errorf("dispatch: %w", ctx.Err())
	}
	if f.err != nil {
		return nil, f.err
	}
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		if f.answer != nil {
			out[i] = f.answer(c)
			continue
		}
		out[i] = envelope.Result{V: 1, CallID: c.ID, Tool: c.Name, Content: envelope.Text(c.Name + ":" + string(c.Input))}
		if c.Name == "fail" {
			out[i].IsError = true
			out[i].Content = envelope.Text("The tool fail failed on purpose.")
		}
	}
	return out, nil
}

func (f *fakeDispatcher) dispatched() [][]envelope.ToolUseBlock {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]envelope.ToolUseBlock(nil), f.calls...)
}

var testDefs = []tools.Definition{
	{Name: "sleep", Description: "Waits.", InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}`)},
	{Name: "echo", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
}

func newTestHandler(t testing.TB, f *fakeDispatcher, mod ...func(*Config)) *Handler {
	t.Helper()
	cfg := Config{
		Dispatcher:  f,
		Definitions: DefinitionsFunc(func(context.Context) ([]tools.Definition, error) { return testDefs, nil }),
	}
	for _, m := range mod {
		m(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// do serves one request in-process; a POST is sent as application/json
// unless hdr sets another Content-Type.
func do(h http.Handler, method, target, body string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decodeError(t testing.TB, w *httptest.ResponseRecorder) ErrorDetail {
	t.Helper()
	var e ErrorResponse
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", w.Body.String(), err)
	}
	if e.Error.Type == "" || e.Error.Message == "" {
		t.Fatalf("error body %q has no type or message", w.Body.String())
	}
	return e.Error
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, query string
		want              string // in the message
	}{
		{"empty", ``, "", "body is empty"},
		{"not JSON", `{"role":"assistant",`, "", "not valid JSON"},
		{"trailing garbage", `{"content":[]} x`, "", "not valid JSON"},
		{"a number", `42`, "", "JSON number"},
		{"a string", `"hi"`, "", "JSON string"},
		{"no content", `{"role":"assistant"}`, "", `neither "content" nor "tool_calls"`},
		{"whole completion", `{"choices":[{"message":{}}]}`, "", "choices[0].message"},
		{"user role", `{"role":"user","content":[]}`, "", `role: is "user"`},
		{"role not string", `{"role":1,"content":[]}`, "", "role: must be a string"},
		{"content object", `{"role":"assistant","content":{}}`, "", "content: must be an array"},
		{"block not object", `{"content":[1]}`, "", "content[0]: must be a content block object"},
		{"block without type", `{"content":[{"text":"x"}]}`, "", "content[0].type: missing"},
		{"tool_use without id", `{"content":[{"type":"tool_use","name":"echo","input":{}}]}`, "", "content[0].id: missing"},
		{"tool_use with empty id", `{"content":[{"type":"tool_use","id":" ","name":"echo","input":{}}]}`, "", "content[0].id: is empty"},
		{"tool_use without name", `{"content":[{"type":"tool_use","id":"a","input":{}}]}`, "", "content[0].name: missing"},
		{"tool_use name number", `{"content":[{"type":"tool_use","id":"a","name":3}]}`, "", "content[0].name: must be a string"},
		{"duplicate ids", `[{"type":"tool_use","id":"a","name":"echo"},{"type":"text","text":""},{"type":"tool_use","id":"a","name":"echo"}]`, "", `[2].id: "a" is also the id of [0]`},
		{"tool_calls object", `{"role":"assistant","tool_calls":{}}`, "", "tool_calls: must be an array"},
		{"tool call without id", `{"tool_calls":[{"type":"function","function":{"name":"echo","arguments":"{}"}}]}`, "", "tool_calls[0].id: missing"},
		{"tool call without function", `{"tool_calls":[{"id":"c","type":"function"}]}`, "", "tool_calls[0].function: missing"},
		{"tool call without name", `{"tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}`, "", "tool_calls[0].function.name: missing"},
		{"bad format", `[]`, "?format=xml", `format "xml": want anthropic, openai, responses or gemini`},
		{"bad timeout", `[]`, "?timeout=soon", `timeout "soon"`},
		{"negative timeout", `[]`, "?timeout=-1s", "must be positive"},
		{"zero timeout", `[]`, "?timeout=0", "must be positive"},
		{"session with newline", `[]`, "?session=a%0Ab", "session parameter has the character"},
		{"forced openai on text content", `{"role":"assistant","content":"Done."}`, "?format=openai", ""},
		{"forced openai on text parts", `{"role":"assistant","content":[{"type":"text","text":"Done."}]}`, "?format=openai", ""},
		{"forced openai on content", `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"echo"}]}`, "?format=openai", "the body looks like an Anthropic Messages assistant message"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeDispatcher{}
			w := do(newTestHandler(t, f), "POST", "/v1/tool_calls"+c.query, c.body)
			if c.want == "" { // not an error: forced OpenAI reads no tool_calls
				if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != "[]" {
					t.Fatalf("status %d body %s; want 200 []", w.Code, w.Body)
				}
				return
			}
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %s", w.Code, w.Body)
			}
			e := decodeError(t, w)
			if e.Type != ErrorInvalidRequest || !strings.Contains(e.Message, c.want) {
				t.Errorf("error %+v; want type invalid_request and a message with %q", e, c.want)
			}
			if n := len(f.dispatched()); n != 0 {
				t.Errorf("%d dispatches for a bad request", n)
			}
		})
	}
}

func TestTooManyCalls(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t, &fakeDispatcher{}, func(c *Config) { c.MaxCalls = 2 })
	for _, body := range []string{
		`[{"type":"tool_use","id":"a","name":"echo"},{"type":"tool_use","id":"b","name":"echo"},{"type":"tool_use","id":"c","name":"echo"}]`,
		`{"tool_calls":[{"id":"a","function":{"name":"e"}},{"id":"b","function":{"name":"e"}},{"id":"c","function":{"name":"e"}}]}`,
	} {
		w := do(h, "POST", "/v1/tool_calls", body)
		if w.Code != http.StatusBadRequest || !strings.Contains(decodeError(t, w).Message, "more than 2 tool calls") {
			t.Errorf("status %d body %s; want 400 naming the limit", w.Code, w.Body)
		}
	}
}

func TestNoToolCallsIsAnEmptyAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, want, format string }{
		{"empty content", `{"role":"assistant","content":[]}`, `{"role":"user","content":[]}`, "anthropic"},
		{"empty array", `[]`, `{"role":"user","content":[]}`, "anthropic"},
		{"text only", `{"role":"assistant","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn"}`, `{"role":"user","content":[]}`, "anthropic"},
		{"string content", `{"role":"assistant","content":"Done."}`, `{"role":"user","content":[]}`, "anthropic"},
		{"null content", `{"role":"assistant","content":null}`, `{"role":"user","content":[]}`, "anthropic"},
		{"openai null tool_calls", `{"role":"assistant","content":"Done.","tool_calls":null}`, `[]`, "openai"},
		{"openai empty tool_calls", `{"role":"assistant","content":"Done.","tool_calls":[]}`, `[]`, "openai"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeDispatcher{}
			w := do(newTestHandler(t, f), "POST", "/v1/tool_calls", c.body)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d body %s", w.Code, w.Body)
			}
			if got := strings.TrimSpace(w.Body.String()); got != c.want {
				t.Errorf("body %s, want %s", got, c.want)
			}
			if got := w.Header().Get(HeaderFormat); got != c.format {
				t.Errorf("%s = %q, want %q", HeaderFormat, got, c.format)
			}
			if n := len(f.dispatched()); n != 0 {
				t.Errorf("%d dispatches, want none", n)
			}
		})
	}
}

func TestAnthropicSkipsOtherBlocksAndKeepsOrder(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{}
	body := `{"role":"assistant","content":[
		{"type":"thinking","thinking":"…","signature":"sig"},
		{"type":"text","text":"Let me look."},
		{"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"a"}},
		{"type":"redacted_thinking","data":"xx"},
		{"type":"tool_use","id":"toolu_2","name":"fail","input":{}},
		{"type":"tool_use","id":"toolu_3","name":"echo"}
	]}`
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls", body, HeaderSession, "s-1")
	if w.Code != http.StatusOK {
		t.Fatalf("status %d body %s", w.Code, w.Body)
	}
	var msg UserMessage
	if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Role != "user" || len(msg.Content) != 3 {
		t.Fatalf("answer %s", w.Body)
	}
	want := []struct {
		id, text string
		isErr    bool
	}{
		{"toolu_1", `echo:{"text":"a"}`, false},
		{"toolu_2", "The tool fail failed on purpose.", true},
		{"toolu_3", "echo:", false},
	}
	for i, wnt := range want {
		b := msg.Content[i]
		if b.Type != "tool_result" || b.ToolUseID != wnt.id || b.Content.Text() != wnt.text || b.IsError != wnt.isErr {
			t.Errorf("content[%d] = %+v, want %+v", i, b, wnt)
		}
	}
	if got := w.Header().Get(HeaderErrorIndexes); got != "1" {
		t.Errorf("%s = %q, want 1", HeaderErrorIndexes, got)
	}
	calls := f.dispatched()
	if len(calls) != 1 || len(calls[0]) != 3 {
		t.Fatalf("dispatched %v; want one turn of 3 calls", calls)
	}
	if f.sessions[0] != "s-1" {
		t.Errorf("session %q, want s-1", f.sessions[0])
	}
}

func TestOpenAILocalErrorsKeepTheirPlace(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{}
	body := `{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"a\"}"}},
		{"id":"call_2","type":"function","function":{"name":"echo","arguments":"{\"text\": \"unterminated"}},
		{"id":"call_3","type":"function","function":{"name":"fail","arguments":""}},
		{"id":"call_4","type":"custom","custom":{"name":"grep","input":"x"}},
		{"id":"call_5","function":{"name":"echo","arguments":{"text":"object given"}}}
	]}`
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls?session=q-1", body)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d body %s", w.Code, w.Body)
	}
	var msgs []ToolMessage
	if err := json.Unmarshal(w.Body.Bytes(), &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 {
		t.Fatalf("answer %s", w.Body)
	}
	for i, m := range msgs {
		if m.Role != "tool" || m.ToolCallID != fmt.Sprintf("call_%d", i+1) {
			t.Errorf("message %d = %+v", i, m)
		}
	}
	checks := []struct {
		i    int
		want string
	}{
		{0, `echo:{"text":"a"}`},
		{1, "Error: The arguments of this call to echo are not valid JSON"},
		{2, "Error: The tool fail failed on purpose."},
		{3, `Error: This tool call is of type "custom"`},
		{4, `echo:{"text":"object given"}`},
	}
	for _, c := range checks {
		if !strings.HasPrefix(msgs[c.i].Content, c.want) {
			t.Errorf("message %d content %q, want prefix %q", c.i, msgs[c.i].Content, c.want)
		}
	}
	if !strings.Contains(msgs[1].Content, "unexpected end of JSON input") {
		t.Errorf("bad-arguments content %q does not say what is wrong with the JSON", msgs[1].Content)
	}
	if got := w.Header().Get(HeaderErrorIndexes); got != "1,2,3" {
		t.Errorf("%s = %q, want 1,2,3", HeaderErrorIndexes, got)
	}
	calls := f.dispatched()
	if len(calls) != 1 || len(calls[0]) != 3 {
		t.Fatalf("dispatched %v; want the 3 runnable calls in one turn", calls)
	}
	if string(calls[0][1].Input) != `{}` {
		t.Errorf("empty arguments became input %s, want {}", calls[0][1].Input)
	}
	if f.sessions[0] != "q-1" {
		t.Errorf("session %q, want q-1 (from the query)", f.sessions[0])
	}
}

func TestOpenAIBareToolCallsArray(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{}
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls",
		`[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{}"}}]`)
	if w.Code != http.StatusOK || w.Header().Get(HeaderFormat) != "openai" {
		t.Fatalf("status %d format %q body %s", w.Code, w.Header().Get(HeaderFormat), w.Body)
	}
	if got := strings.TrimSpace(w.Body.String()); got != `[{"role":"tool","tool_call_id":"call_1","content":"echo:{}"}]` {
		t.Errorf("body %s", got)
	}
}

func TestOpenAINonTextBlocksAreNamed(t *testing.T) {
	t.Parallel()
	img := envelope.Block{Type: "image", Raw: json.RawMessage(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}`)}
	f := &fakeDispatcher{answer: func(c envelope.ToolUseBlock) envelope.Result {
		return envelope.Result{CallID: c.ID, Content: envelope.Content{{Type: "text", Text: "a chart:"}, img}}
	}}
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls", `{"tool_calls":[{"id":"c","function":{"name":"plot","arguments":"{}"}}]}`)
	var msgs []ToolMessage
	if err := json.Unmarshal(w.Body.Bytes(), &msgs); err != nil || len(msgs) != 1 {
		t.Fatalf("body %s: %v", w.Body, err)
	}
	if want := "a chart:\n[image block omitted: OpenAI tool messages carry text only]"; msgs[0].Content != want {
		t.Errorf("content %q, want %q", msgs[0].Content, want)
	}
	// The Anthropic answer carries the image as it is.
	w = do(newTestHandler(t, f), "POST", "/v1/tool_calls", `[{"type":"tool_use","id":"c","name":"plot","input":{}}]`)
	if !strings.Contains(w.Body.String(), `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}`) {
		t.Errorf("anthropic answer %s lost the image block", w.Body)
	}
}

func TestTimeoutParameter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		query string
		want  time.Duration
	}{
		{"", DefaultTimeoutDefault},
		{"?timeout=90s", 90 * time.Second},
		{"?timeout=2.5", 2500 * time.Millisecond},
		{"?timeout=30", 30 * time.Second},
		{"?timeout=1h", MaxTimeoutDefault},
		{"?timeout=99999999999", MaxTimeoutDefault},
	}
	for _, c := range cases {
		var got time.Duration
		start := time.Now()
		f := &fakeDispatcher{deadline: func(d time.Time, ok bool) {
			if ok {
				got = d.Sub(start)
			}
		}}
		w := do(newTestHandler(t, f), "POST", "/v1/tool_calls"+c.query, `[{"type":"tool_use","id":"a","name":"echo"}]`)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d body %s", c.query, w.Code, w.Body)
		}
		// got is measured from before the request: it may be a little
		// longer than the timeout, never shorter.
		if got < c.want || got > c.want+time.Minute/2 {
			t.Errorf("%s: deadline in %v, want %v", c.query, got, c.want)
		}
	}
}

func TestTraceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	f := &fakeDispatcher{}
	h := newTestHandler(t, f)
	w := do(h, "POST", "/v1/tool_calls", `[{"type":"tool_use","id":"a","name":"echo"}]`, envelope.HeaderTraceparent, tp)
	if got := w.Header().Get(envelope.HeaderTraceparent); got != tp {
		t.Errorf("answer traceparent %q, want %q", got, tp)
	}
	// No (or an invalid) traceparent: a new trace, returned to the caller.
	w = do(h, "POST", "/v1/tool_calls", `[{"type":"tool_use","id":"b","name":"echo"}]`, envelope.HeaderTraceparent, "00-zz")
	got := w.Header().Get(envelope.HeaderTraceparent)
	if !dispatch.ValidTraceparent(got) || got == tp {
		t.Errorf("answer traceparent %q, want a new valid one", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.traces[0] != tp || f.traces[1] != got {
		t.Errorf("dispatched with traceparents %q, want %q then %q", f.traces, tp, got)
	}
}

func TestUnavailableIs503(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{err: fmt.Errorf("dispatch: publish: %w: nats: timeout", dispatch.ErrUnavailable)}
	w := do(newTestHandler(t, f), "POST", "/v1/tool_calls", `[{"type":"tool_use","id":"a","name":"echo"}]`)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("status %d Retry-After %q; want 503 and 2", w.Code, w.Header().Get("Retry-After"))
	}
	if e := decodeError(t, w); e.Type != ErrorUnavailable {
		t.Errorf("error %+v", e)
	}
	// Calls answered locally need no pool.
	w = do(newTestHandler(t, f), "POST", "/v1/tool_calls", `{"tool_calls":[{"id":"a","function":{"name":"echo","arguments":"{"}}]}`)
	if w.Code != http.StatusOK {
		t.Errorf("status %d for a turn with nothing to dispatch", w.Code)
	}
}

func TestClientGoneIsNot500(t *testing.T) {
	t.Parallel()
	f := &fakeDispatcher{block: true}
	h := newTestHandler(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, "POST", "/v1/tool_calls", strings.NewReader(`[{"type":"tool_use","id":"a","name":"echo"}]`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, r)
	}()
	for len(f.dispatched()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if w.Code != StatusClientClosed {
		t.Errorf("status %d, want %d", w.Code, StatusClientClosed)
	}
}

func TestBodyOverTheCap(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t, &fakeDispatcher{}, func(c *Config) { c.MaxBodyBytes = 1024 })
	body := `[{"type":"text","text":"` + strings.Repeat("x", 2000) + `"}]`
	w := do(h, "POST", "/v1/tool_calls", body)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", w.Code)
	}
	if e := decodeError(t, w); e.Type != ErrorTooLarge || !strings.Contains(e.Message, "1024 bytes") {
		t.Errorf("error %+v", e)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t, &fakeDispatcher{})
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/tool_calls", 405, "POST"},
		{"PUT", "/v1/tool_calls", 405, "POST"},
		{"POST", "/v1/tools", 405, "GET, HEAD"},
		{"DELETE", "/v1/tools", 405, "GET, HEAD"},
		{"GET", "/v1/nope", 404, ""},
		{"GET", "/v1/tools", 200, ""},
		{"HEAD", "/v1/tools", 200, ""},
	}
	for _, c := range cases {
		w := do(h, c.method, c.path, "")
		if w.Code != c.status || w.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: status %d Allow %q; want %d %q", c.method, c.path, w.Code, w.Header().Get("Allow"), c.status, c.allow)
		}
		if c.status >= 400 {
			decodeError(t, w)
		}
		if c.method == "HEAD" && w.Body.Len() != 0 {
			t.Errorf("HEAD answered a body")
		}
	}
}

func TestToolsFormats(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t, &fakeDispatcher{})
	w := do(h, "GET", "/v1/tools", "")
	want := `{"tools":[` +
		`{"name":"echo","description":"Echoes.","input_schema":{"type":"object","properties":{"text":{"type":"string"}}}},` +
		`{"name":"sleep","description":"Waits.","input_schema":{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}}]}`
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != want {
		t.Errorf("anthropic tools: %d %s\nwant %s", w.Code, got, want)
	}
	w = do(h, "GET", "/v1/tools?format=openai", "")
	want = `[` +
		`{"type":"function","function":{"name":"echo","description":"Echoes.","parameters":{"type":"object","properties":{"text":{"type":"string"}}}}},` +
		`{"type":"function","function":{"name":"sleep","description":"Waits.","parameters":{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}}}]`
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != want {
		t.Errorf("openai tools: %d %s\nwant %s", w.Code, got, want)
	}
	if w := do(h, "GET", "/v1/tools?format=yaml", ""); w.Code != 400 {
		t.Errorf("format=yaml: status %d, want 400", w.Code)
	}
}

func TestToolsEmptyAndUnavailable(t *testing.T) {
	t.Parallel()
	empty, err := New(Config{Dispatcher: &fakeDispatcher{}, Definitions: RegistryDefinitions(tools.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	if w := do(empty, "GET", "/v1/tools", ""); strings.TrimSpace(w.Body.String()) != `{"tools":[]}` {
		t.Errorf("no tools: %s", w.Body)
	}
	if w := do(empty, "GET", "/v1/tools?format=openai", ""); strings.TrimSpace(w.Body.String()) != `[]` {
		t.Errorf("no tools, openai: %s", w.Body)
	}
	broken, err := New(Config{Dispatcher: &fakeDispatcher{}, Definitions: DefinitionsFunc(func(context.Context) ([]tools.Definition, error) {
		return nil, errors.New("discovery bucket unreachable")
	})})
	if err != nil {
		t.Fatal(err)
	}
	w := do(broken, "GET", "/v1/tools", "")
	if w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("status %d Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if strings.Contains(w.Body.String(), "discovery bucket") {
		t.Errorf("the answer leaks the internal error: %s", w.Body)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Dispatcher: &fakeDispatcher{}, Definitions: RegistryDefinitions(tools.NewRegistry())}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no dispatcher", func(c *Config) { c.Dispatcher = nil }, "Dispatcher"},
		{"no definitions", func(c *Config) { c.Definitions = nil }, "Definitions"},
		{"negative body cap", func(c *Config) { c.MaxBodyBytes = -1 }, "MaxBodyBytes"},
		{"default over max", func(c *Config) { c.DefaultTimeout = time.Hour }, "DefaultTimeout"},
		{"negative calls", func(c *Config) { c.MaxCalls = -1 }, "MaxCalls"},
	}
	for _, c := range cases {
		cfg := ok
		c.mod(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %s", c.name, err, c.want)
		}
	}
	if _, err := New(ok); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// The answer is written once, with a Content-Length, and is valid JSON.
func TestAnswerIsCompleteJSON(t *testing.T) {
	t.Parallel()
	w := do(newTestHandler(t, &fakeDispatcher{}), "POST", "/v1/tool_calls", `[{"type":"tool_use","id":"a","name":"echo","input":{"text":"<&>"}}]`)
	body, _ := io.ReadAll(w.Result().Body)
	if !json.Valid(body) || w.Header().Get("Content-Length") == "" || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("headers %v body %s", w.Header(), body)
	}
	if !strings.Contains(string(body), `<&>`) {
		t.Errorf("HTML characters escaped in %s", body)
	}
}
