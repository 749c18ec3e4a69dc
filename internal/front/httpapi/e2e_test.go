package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// apiBundle is the HTTP API in front of a whole pool: a real JetStream
// server, a worker serving echo, sleep and flaky, a dispatcher, and an
// httptest.Server of the handler.
type apiBundle struct {
	pool *pooltest.Pool
	srv  *httptest.Server
}

func setupAPI(t *testing.T, mods ...func(*dispatch.Config)) *apiBundle {
	t.Helper()
	p := pooltest.Start(t, mods...)
	h, err := httpapi.New(httpapi.Config{
		Dispatcher:  p.D,
		Definitions: httpapi.RegistryDefinitions(p.Reg),
		Logger:      natstest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &apiBundle{pool: p, srv: srv}
}

var idSeq atomic.Int64

// uid makes ids unique in the test binary (call ids are deduplicated
// within a server's window, and tests share nothing but the binary).
func uid(prefix string) string { return prefix + strconv.FormatInt(idSeq.Add(1), 10) }

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (b *apiBundle) post(t *testing.T, query, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest("POST", b.srv.URL+"/v1/tool_calls"+query, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return send(t, req)
}

func send(t *testing.T, req *http.Request) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

func TestE2EAnthropicMixedResults(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ids := []string{uid("toolu_ok_"), uid("toolu_404_"), uid("toolu_unknown_"), uid("toolu_bad_"), uid("toolu_sleep_")}
	body := `{"role":"assistant","content":[
		{"type":"text","text":"I will call some tools."},
		{"type":"tool_use","id":"` + ids[0] + `","name":"echo","input":{"text":"hello"}},
		{"type":"tool_use","id":"` + ids[1] + `","name":"flaky","input":{"fail":"404"}},
		{"type":"tool_use","id":"` + ids[2] + `","name":"search_web","input":{"query":"x"}},
		{"type":"tool_use","id":"` + ids[3] + `","name":"sleep","input":{"ms":"soon"}},
		{"type":"tool_use","id":"` + ids[4] + `","name":"sleep","input":{"ms":20}}
	]}`
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	a := b.post(t, "", body, envelope.HeaderTraceparent, tp)
	if a.status != 200 {
		t.Fatalf("status %d body %s", a.status, a.body)
	}
	var msg httpapi.UserMessage
	if err := json.Unmarshal(a.body, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Role != "user" || len(msg.Content) != len(ids) {
		t.Fatalf("answer %s", a.body)
	}
	for i, blk := range msg.Content {
		if blk.Type != "tool_result" || blk.ToolUseID != ids[i] {
			t.Errorf("content[%d] is %s for %s, want tool_result for %s", i, blk.Type, blk.ToolUseID, ids[i])
		}
	}
	c := msg.Content
	if c[0].IsError || c[0].Content.Text() != "hello" {
		t.Errorf("echo: %+v", c[0])
	}
	if !c[1].IsError || !strings.Contains(c[1].Content.Text(), "flaky") {
		t.Errorf("flaky 404: %+v", c[1])
	}
	if !c[2].IsError || !strings.Contains(c[2].Content.Text(), "search_web") || !strings.Contains(c[2].Content.Text(), "echo") {
		t.Errorf("unknown tool: %+v; want an error naming it and the available tools", c[2])
	}
	if !c[3].IsError || !strings.Contains(c[3].Content.Text(), "ms") {
		t.Errorf("bad input: %+v; want an error naming the field", c[3])
	}
	if c[4].IsError || c[4].Content.Text() != "slept 20 ms" {
		t.Errorf("sleep: %+v", c[4])
	}
	if got := a.header.Get(httpapi.HeaderErrorIndexes); got != "1,2,3" {
		t.Errorf("%s = %q, want 1,2,3", httpapi.HeaderErrorIndexes, got)
	}
	if got := a.header.Get(envelope.HeaderTraceparent); got != tp {
		t.Errorf("traceparent %q, want %q", got, tp)
	}
	// The raw JSON: is_error only on errors, as the Messages API expects.
	var raw struct {
		Content []map[string]json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(a.body, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.Content[0]["is_error"]; ok {
		t.Errorf("a success carries is_error: %s", a.body)
	}
	if string(raw.Content[1]["is_error"]) != "true" {
		t.Errorf("an error lacks is_error: true: %s", a.body)
	}
}

func TestE2EOpenAIMixedResults(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ids := []string{uid("call_ok_"), uid("call_json_"), uid("call_404_"), uid("call_unknown_")}
	body := `{"role":"assistant","content":null,"refusal":null,"tool_calls":[
		{"id":"` + ids[0] + `","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi there\"}"}},
		{"id":"` + ids[1] + `","type":"function","function":{"name":"echo","arguments":"{text: hi}"}},
		{"id":"` + ids[2] + `","type":"function","function":{"name":"flaky","arguments":"{\"fail\":\"404\"}"}},
		{"id":"` + ids[3] + `","type":"function","function":{"name":"nope","arguments":"{}"}}
	]}`
	a := b.post(t, "", body)
	if a.status != 200 || a.header.Get(httpapi.HeaderFormat) != "openai" {
		t.Fatalf("status %d format %q body %s", a.status, a.header.Get(httpapi.HeaderFormat), a.body)
	}
	var msgs []httpapi.ToolMessage
	if err := json.Unmarshal(a.body, &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(ids) {
		t.Fatalf("answer %s", a.body)
	}
	for i, m := range msgs {
		if m.Role != "tool" || m.ToolCallID != ids[i] {
			t.Errorf("message %d: %+v, want a tool message for %s", i, m, ids[i])
		}
	}
	if msgs[0].Content != "hi there" {
		t.Errorf("echo: %q", msgs[0].Content)
	}
	if !strings.HasPrefix(msgs[1].Content, httpapi.ErrorPrefix) || !strings.Contains(msgs[1].Content, "not valid JSON") {
		t.Errorf("bad arguments: %q", msgs[1].Content)
	}
	if !strings.HasPrefix(msgs[2].Content, httpapi.ErrorPrefix) || !strings.Contains(msgs[2].Content, "flaky") {
		t.Errorf("flaky 404: %q", msgs[2].Content)
	}
	if !strings.HasPrefix(msgs[3].Content, httpapi.ErrorPrefix) || !strings.Contains(msgs[3].Content, "nope") {
		t.Errorf("unknown tool: %q", msgs[3].Content)
	}
	if got := a.header.Get(httpapi.HeaderErrorIndexes); got != "1,2,3" {
		t.Errorf("%s = %q, want 1,2,3", httpapi.HeaderErrorIndexes, got)
	}
}

func TestE2EBadBodies(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	if a := b.post(t, "", `this is not JSON`); a.status != 400 || !strings.Contains(string(a.body), "not valid JSON") {
		t.Errorf("not JSON: %d %s", a.status, a.body)
	}
	if a := b.post(t, "", `{"role":"assistant","content":[]}`); a.status != 200 || strings.TrimSpace(string(a.body)) != `{"role":"user","content":[]}` {
		t.Errorf("empty content: %d %s", a.status, a.body)
	}
	big := `[{"type":"text","text":"` + strings.Repeat("x", 10<<20) + `"}]`
	a := b.post(t, "", big)
	if a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("10 MiB body: status %d, want 413", a.status)
	}
	var e httpapi.ErrorResponse
	if err := json.Unmarshal(a.body, &e); err != nil || e.Error.Type != httpapi.ErrorTooLarge {
		t.Errorf("10 MiB body: %s (%v)", a.body, err)
	}
	req, _ := http.NewRequest("GET", b.srv.URL+"/v1/tool_calls", nil)
	if a := send(t, req); a.status != 405 || a.header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/tool_calls: %d Allow %q", a.status, a.header.Get("Allow"))
	}
}

// The third failure in a row of one tool in one session carries the advice
// to change approach; another session is not affected.
func TestE2ERepeatedFailureAdvice(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	advice := classify.RepeatedFailureMessage("flaky", 3)
	for i := 1; i <= 3; i++ {
		body := `[{"type":"tool_use","id":"` + uid("toolu_rep_") + `","name":"flaky","input":{"fail":"404"}}]`
		a := b.post(t, "", body, httpapi.HeaderSession, "sess-advice")
		var msg httpapi.UserMessage
		if err := json.Unmarshal(a.body, &msg); err != nil || len(msg.Content) != 1 {
			t.Fatalf("turn %d: %s (%v)", i, a.body, err)
		}
		has := strings.Contains(msg.Content[0].Content.Text(), advice)
		if has != (i == 3) {
			t.Errorf("turn %d: advice present = %v; content %q", i, has, msg.Content[0].Content.Text())
		}
	}
	a := b.post(t, "?session=other", `[{"type":"tool_use","id":"`+uid("toolu_rep_")+`","name":"flaky","input":{"fail":"404"}}]`)
	if strings.Contains(string(a.body), "in a row") {
		t.Errorf("another session got the advice: %s", a.body)
	}
}

func TestE2ETools(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	req, _ := http.NewRequest("GET", b.srv.URL+"/v1/tools", nil)
	a := send(t, req)
	var tr httpapi.ToolsResponse
	if err := json.Unmarshal(a.body, &tr); err != nil || a.status != 200 {
		t.Fatalf("%d %s (%v)", a.status, a.body, err)
	}
	var names []string
	for _, d := range tr.Tools {
		names = append(names, d.Name)
		if !json.Valid(d.InputSchema) || !bytes.Contains(d.InputSchema, []byte(`"type":"object"`)) {
			t.Errorf("%s: schema %s", d.Name, d.InputSchema)
		}
	}
	if strings.Join(names, ",") != "echo,flaky,sleep" {
		t.Errorf("tools %v", names)
	}
	req, _ = http.NewRequest("GET", b.srv.URL+"/v1/tools?format=openai", nil)
	a = send(t, req)
	var ot []httpapi.OpenAITool
	if err := json.Unmarshal(a.body, &ot); err != nil || len(ot) != 3 || ot[0].Type != "function" || ot[0].Function.Name != "echo" || len(ot[0].Function.Parameters) == 0 {
		t.Errorf("openai tools: %s (%v)", a.body, err)
	}
}

// NATS goes away: the API answers 503 with Retry-After, and works again
// once the server is back on the same address and store.
func TestE2EUnavailableThenRecovers(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, func(c *dispatch.Config) { c.PublishTimeout, c.PublishRetryFor = 500*time.Millisecond, time.Second })
	echo := func() string {
		return `[{"type":"tool_use","id":"` + uid("toolu_outage_") + `","name":"echo","input":{"text":"up"}}]`
	}
	if a := b.post(t, "", echo()); a.status != 200 {
		t.Fatalf("before the outage: %d %s", a.status, a.body)
	}

	b.pool.Stop()
	a := b.post(t, "?timeout=10s", echo())
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("NATS down: status %d body %s; want 503", a.status, a.body)
	}
	if ra, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want whole seconds", a.header.Get("Retry-After"))
	}
	var e httpapi.ErrorResponse
	if err := json.Unmarshal(a.body, &e); err != nil || e.Error.Type != httpapi.ErrorUnavailable {
		t.Errorf("503 body %s (%v)", a.body, err)
	}

	b.pool.Restart(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := b.post(t, "?timeout=5s", echo())
		if a.status == 200 {
			var msg httpapi.UserMessage
			if err := json.Unmarshal(a.body, &msg); err != nil || len(msg.Content) != 1 {
				t.Fatalf("after the restart: %s (%v)", a.body, err)
			}
			if !msg.Content[0].IsError && msg.Content[0].Content.Text() == "up" {
				break
			}
		} else if a.status != http.StatusServiceUnavailable {
			t.Fatalf("while reconnecting: status %d body %s; want 200 or 503", a.status, a.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API did not recover within 30s after NATS came back; last answer %d %s", a.status, a.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A Gemini turn through the pool: a call with an id, calls without, a
// transient failure retried to success, a permanent one under
// response.error and an unknown tool; posting the turn again (a retry)
// answers the same, the calls keyed by the turn.
func TestE2EGeminiMixedResults(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	id := uid("g_")
	body := `{"responseId":"` + uid("resp_") + `","candidates":[{"content":{"role":"model","parts":[
		{"text":"Calling."},
		{"functionCall":{"id":"` + id + `","name":"echo","args":{"text":"hi there"}}},
		{"functionCall":{"name":"flaky","args":{"fail":"503","times":1}}},
		{"functionCall":{"name":"flaky","args":{"fail":"404"}}},
		{"functionCall":{"name":"nope","args":{}}}]}}]}`
	var first []byte
	for range 2 {
		a := b.post(t, "", body)
		if a.status != 200 || a.header.Get(httpapi.HeaderFormat) != "gemini" || a.header.Get(httpapi.HeaderErrorIndexes) != "2,3" {
			t.Fatalf("status %d headers %v body %s", a.status, a.header, a.body)
		}
		if first != nil {
			if string(a.body) != string(first) {
				t.Errorf("the same turn again: %s, first %s", a.body, first)
			}
			break
		}
		first = a.body
	}
	var c httpapi.GeminiContent
	if err := json.Unmarshal(first, &c); err != nil || c.Role != "user" || len(c.Parts) != 4 {
		t.Fatalf("answer %s: %v", first, err)
	}
	p := c.Parts
	if fr := p[0].FunctionResponse; fr.ID != id || fr.Name != "echo" || fr.Response.Output == nil || *fr.Response.Output != "hi there" {
		t.Errorf("echo: %+v", fr)
	}
	if fr := p[1].FunctionResponse; fr.ID != "" || fr.Response.Output == nil || *fr.Response.Output != "ok after 2 attempts" {
		t.Errorf("flaky 503 once: %+v", fr)
	}
	if fr := p[2].FunctionResponse; fr.ID != "" || fr.Response.Error == nil || !strings.Contains(*fr.Response.Error, "HTTP 404") {
		t.Errorf("flaky 404: %+v", fr)
	}
	if fr := p[3].FunctionResponse; fr.Name != "nope" || fr.Response.Error == nil || !strings.Contains(*fr.Response.Error, "echo") {
		t.Errorf("unknown tool: %+v (want the available tools named)", fr)
	}
}

// TestE2ETinyTimeoutIsRaised: a timeout too short for a call to be
// published and acknowledged (nanoseconds, microseconds) is raised to
// MinTimeout; the call runs and is answered (it was a 500, or a 503
// saying the message server was unreachable, and an expired dead letter).
func TestE2ETinyTimeoutIsRaised(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for _, q := range []string{"?timeout=1ns", "?timeout=0.000001", "?timeout=500us"} {
		body := `[{"type":"tool_use","id":"` + uid("toolu_tiny_") + `","name":"echo","input":{"text":"tiny"}}]`
		a := b.post(t, q, body)
		if a.status != http.StatusOK || !strings.Contains(string(a.body), `"tiny"`) || strings.Contains(string(a.body), `"is_error":true`) {
			t.Errorf("%s: %d %s; want 200 and echo's result", q, a.status, a.body)
		}
	}
}
