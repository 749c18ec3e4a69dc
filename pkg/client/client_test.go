package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/client"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// message decodes a Messages API response.
func message(t *testing.T, content string) *anthropic.Message {
	t.Helper()
	var m anthropic.Message
	if err := json.Unmarshal([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use",
		"usage":{"input_tokens":1,"output_tokens":1},"content":`+content+`}`), &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestToolUseConversions(t *testing.T) {
	t.Parallel()
	m := message(t, `[{"type":"text","text":"hi"},
		{"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"a"}},
		{"type":"tool_use","id":"toolu_2","name":"sleep","input":{}}]`)
	uses := client.ToolUseBlocks(m)
	if len(uses) != 2 || uses[0].ID != "toolu_1" || uses[1].Name != "sleep" {
		t.Fatalf("ToolUseBlocks = %+v", uses)
	}
	env := client.ToolUses(uses)
	if env[0].Type != "tool_use" || env[0].ID != "toolu_1" || env[0].Name != "echo" || string(env[0].Input) != `{"text":"a"}` {
		t.Errorf("ToolUse = %+v", env[0])
	}
	if got := client.ToolUse(anthropic.ToolUseBlock{ID: "x", Name: "echo"}); string(got.Input) != `{}` {
		t.Errorf("missing input became %s, want {}", got.Input)
	}
	if client.ToolUseBlocks(nil) != nil {
		t.Error("ToolUseBlocks(nil) is not nil")
	}
}

// ToolResult loses nothing: the SDK param encodes to the same JSON as the
// envelope block, for text, errors, images and blocks the SDK does not
// know.
func TestToolResultConversionIsLossless(t *testing.T) {
	t.Parallel()
	img := envelope.Block{Type: "image", Raw: json.RawMessage(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}`)}
	doc := envelope.Block{Type: "document", Raw: json.RawMessage(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hello"},"title":"notes"}`)}
	future := envelope.Block{Type: "hologram", Raw: json.RawMessage(`{"type":"hologram","frames":[1,2,3]}`)}
	cases := []envelope.ToolResultBlock{
		{Type: "tool_result", ToolUseID: "a", Content: envelope.Text("plain")},
		{Type: "tool_result", ToolUseID: "b", Content: envelope.Text("The tool failed."), IsError: true},
		{Type: "tool_result", ToolUseID: "c", Content: envelope.Content{{Type: "text", Text: "two"}, {Type: "text", Text: "blocks"}}},
		{Type: "tool_result", ToolUseID: "d", Content: envelope.Content{{Type: "text", Text: "a chart:"}, img, doc}},
		{Type: "tool_result", ToolUseID: "e", Content: envelope.Content{future}},
		{Type: "tool_result", ToolUseID: "f", Content: envelope.Content{}},
	}
	for _, b := range cases {
		p := client.ToolResult(b)
		if !sameJSON(t, mustJSON(t, p), mustJSON(t, b)) {
			t.Errorf("%s: SDK param %s, envelope %s", b.ToolUseID, mustJSON(t, p), mustJSON(t, b))
		}
	}
	p := client.ToolResult(cases[3])
	if p.Content[1].OfImage == nil || p.Content[2].OfDocument == nil {
		t.Errorf("known blocks did not become SDK variants: %+v", p.Content)
	}
	if p := client.ToolResult(cases[0]); p.IsError.Valid() {
		t.Error("a success has is_error set")
	}

	msg := client.UserMessage(client.ToolResults(cases[:2]))
	want := `{"role":"user","content":[` +
		`{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"plain"}]},` +
		`{"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"The tool failed."}],"is_error":true}]}`
	if !sameJSON(t, mustJSON(t, msg), []byte(want)) {
		t.Errorf("UserMessage = %s\nwant %s", mustJSON(t, msg), want)
	}
}

// ToolParam keeps the whole schema: the SDK param encodes to the
// definition's JSON.
func TestToolParamConversion(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	params, err := client.ToolParams(reg.Definitions())
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range reg.Definitions() {
		if !sameJSON(t, mustJSON(t, params[i]), mustJSON(t, d)) {
			t.Errorf("%s:\n got %s\nwant %s", d.Name, mustJSON(t, params[i]), mustJSON(t, d))
		}
	}
	bad := []tools.Definition{
		{Name: "a", InputSchema: json.RawMessage(`[]`)},
		{Name: "b", InputSchema: json.RawMessage(`{"type":"object","required":"x"}`)},
		{Name: "c", InputSchema: json.RawMessage(`{"type":"object","required":[1]}`)},
	}
	for _, d := range bad {
		if _, err := client.ToolParam(d); err == nil || !strings.Contains(err.Error(), d.Name) {
			t.Errorf("%s: err %v, want one naming the tool", d.Name, err)
		}
	}
}

// poolBundle is the HTTP API of a real pool, and a Pool client for it.
type poolBundle struct {
	p    *pooltest.Pool
	api  *httptest.Server
	pool *client.Pool
}

func setupPool(t *testing.T, opts ...client.Option) *poolBundle {
	t.Helper()
	p := pooltest.Start(t)
	h, err := httpapi.New(httpapi.Config{Dispatcher: p.D, Definitions: httpapi.RegistryDefinitions(p.Reg)})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(h)
	t.Cleanup(api.Close)
	c, err := client.New(api.URL+"/", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &poolBundle{p: p, api: api, pool: c}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestPoolDispatch(t *testing.T) {
	t.Parallel()
	b := setupPool(t)
	m := message(t, `[{"type":"tool_use","id":"toolu_p1","name":"echo","input":{"text":"over http"}},
		{"type":"tool_use","id":"toolu_p2","name":"flaky","input":{"fail":"404"}},
		{"type":"tool_use","id":"toolu_p3","name":"nope","input":{}}]`)
	results, err := b.pool.Dispatch(ctxFor(t, 60*time.Second), "s", client.ToolUseBlocks(m))
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d results", len(results))
	}
	wantErr := []bool{false, true, true}
	for i, r := range results {
		if r.ToolUseID != client.ToolUseBlocks(m)[i].ID || r.IsError.Value != wantErr[i] {
			t.Errorf("result %d: %s is_error %v", i, r.ToolUseID, r.IsError.Value)
		}
	}
	if results[0].Content[0].OfText == nil || results[0].Content[0].OfText.Text != "over http" {
		t.Errorf("echo result %s", mustJSON(t, results[0]))
	}

	// Local gives the same answers in-process.
	local := client.NewLocal(b.p.D, httpapi.RegistryDefinitions(b.p.Reg))
	again, err := local.Dispatch(ctxFor(t, 60*time.Second), "s2", client.ToolUseBlocks(m))
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, mustJSON(t, again), mustJSON(t, results)) {
		t.Errorf("Local %s\nPool %s", mustJSON(t, again), mustJSON(t, results))
	}

	remote, err := b.pool.Tools(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	inproc, err := local.Tools(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(remote) != 3 || !sameJSON(t, mustJSON(t, remote), mustJSON(t, inproc)) {
		t.Errorf("Pool.Tools %s\nLocal.Tools %s", mustJSON(t, remote), mustJSON(t, inproc))
	}
	if res, err := b.pool.Dispatch(context.Background(), "", nil); res != nil || err != nil {
		t.Errorf("no calls: %v, %v", res, err)
	}
}

// recorder is an API stand-in that records requests and answers with
// status and body.
type recorder struct {
	mu     sync.Mutex
	reqs   []*http.Request
	status int
	body   string
	header http.Header
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Clone(context.Background()))
	r.mu.Unlock()
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = w.Write([]byte(r.body))
}

func (r *recorder) last() *http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

func TestPoolErrors(t *testing.T) {
	t.Parallel()
	uses := []anthropic.ToolUseBlock{{ID: "toolu_x", Name: "echo", Input: json.RawMessage(`{}`)}}

	rec := &recorder{status: 503, header: http.Header{"Retry-After": {"2"}},
		body: `{"error":{"type":"unavailable","message":"the tool pool cannot take calls right now"}}`}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Dispatch(context.Background(), "", uses)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 503 || ae.Type != httpapi.ErrorUnavailable || ae.RetryAfter != 2*time.Second {
		t.Fatalf("503: err %v (%+v)", err, ae)
	}
	if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, dispatch.ErrUnavailable) {
		t.Errorf("503 does not match ErrUnavailable: %v", err)
	}

	rec.status, rec.header = 400, nil
	rec.body = `{"error":{"type":"invalid_request","message":"content[0].id: missing"}}`
	_, err = c.Dispatch(context.Background(), "", uses)
	if !errors.As(err, &ae) || ae.StatusCode != 400 || errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "content[0].id") {
		t.Errorf("400: err %v", err)
	}

	rec.status, rec.body = 502, `<html>bad gateway</html>`
	_, err = c.Dispatch(context.Background(), "", uses)
	if !errors.As(err, &ae) || ae.Type != "http_502" || !strings.Contains(ae.Message, "bad gateway") {
		t.Errorf("502 from a proxy: err %v", err)
	}

	rec.status, rec.body = 200, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"other","content":[]}]}`
	if _, err = c.Dispatch(context.Background(), "", uses); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("answer for another call: err %v", err)
	}
	rec.body = `{"role":"user","content":[]}`
	if _, err = c.Dispatch(context.Background(), "", uses); err == nil || !strings.Contains(err.Error(), "0 results for 1 calls") {
		t.Errorf("missing results: err %v", err)
	}

	// Nothing listening: unavailable.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	c2, _ := client.New(closed.URL)
	if _, err := c2.Dispatch(context.Background(), "", uses); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("connection refused: err %v, want ErrUnavailable", err)
	}
	// A cancelled ctx is the caller's, not the pool's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Dispatch(ctx, "", uses); !errors.Is(err, context.Canceled) || errors.Is(err, client.ErrUnavailable) {
		t.Errorf("cancelled: err %v", err)
	}
}

func TestPoolRequest(t *testing.T) {
	t.Parallel()
	rec := &recorder{status: 200, body: `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":[]}]}`}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	uses := []anthropic.ToolUseBlock{{ID: "toolu_x", Name: "echo", Input: json.RawMessage(`{"text":"a"}`)}}

	c, err := client.New(srv.URL, client.WithHeader("Authorization", "Bearer proxy"))
	if err != nil {
		t.Fatal(err)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, cancel := context.WithTimeout(dispatch.WithTraceparent(context.Background(), tp), 20*time.Second)
	defer cancel()
	if _, err := c.Dispatch(ctx, "sess-1", uses); err != nil {
		t.Fatal(err)
	}
	r := rec.last()
	if r.Method != "POST" || r.URL.Path != "/v1/tool_calls" || r.Header.Get(httpapi.HeaderSession) != "sess-1" ||
		r.Header.Get("traceparent") != tp || r.Header.Get("Authorization") != "Bearer proxy" {
		t.Errorf("request %s %s headers %v", r.Method, r.URL, r.Header)
	}
	// The pool is asked to answer before the ctx ends.
	d, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || d <= 0 || d >= 20*time.Second {
		t.Errorf("timeout %q, want a little under the ctx's 20s", r.URL.Query().Get("timeout"))
	}

	c, _ = client.New(srv.URL, client.WithTimeout(90*time.Second))
	if _, err := c.Dispatch(context.Background(), "", uses); err != nil {
		t.Fatal(err)
	}
	if got := rec.last().URL.Query().Get("timeout"); got != "1m30s" {
		t.Errorf("timeout %q, want 1m30s", got)
	}
	c, _ = client.New(srv.URL)
	if _, err := c.Dispatch(context.Background(), "", uses); err != nil {
		t.Fatal(err)
	}
	if r := rec.last(); r.URL.RawQuery != "" || r.Header.Get(httpapi.HeaderSession) != "" {
		t.Errorf("no deadline, no session: query %q session %q", r.URL.RawQuery, r.Header.Get(httpapi.HeaderSession))
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:8080", "ftp://x", "http://", "http://h:1/?a=b"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	for _, o := range []client.Option{client.WithTimeout(0), client.WithHTTPClient(nil), client.WithHeader("", "x")} {
		if _, err := client.New("http://127.0.0.1:1", o); err == nil {
			t.Error("a bad option was accepted")
		}
	}
}

// The API key goes with every request: from WithAPIKey, else from
// TOOLPOOL_API_KEY; a 429 matches ErrSaturated and ErrUnavailable.
func TestPoolAPIKeyAndSaturation(t *testing.T) {
	rec := &recorder{status: 200, body: `{"tools":[]}`}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	t.Setenv(client.EnvAPIKey, "env-0123456789abcdef")
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Definitions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.last().Header.Get("Authorization"); got != "Bearer env-0123456789abcdef" {
		t.Errorf("Authorization %q from the environment", got)
	}
	c, _ = client.New(srv.URL, client.WithAPIKey("opt-0123456789abcdef"))
	if _, err := c.Definitions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.last().Header.Get("Authorization"); got != "Bearer opt-0123456789abcdef" {
		t.Errorf("Authorization %q from WithAPIKey", got)
	}
	if _, err := client.New(srv.URL, client.WithAPIKey("a b")); err == nil {
		t.Error("a key with a space was accepted")
	}

	rec.status, rec.header = 429, http.Header{"Retry-After": {"2"}}
	rec.body = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":[{"type":"text","text":"The call to echo was not run: the tool pool is saturated."}],"is_error":true}]}`
	_, err = c.Dispatch(context.Background(), "", []anthropic.ToolUseBlock{{ID: "toolu_x", Name: "echo", Input: json.RawMessage(`{}`)}})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Type != "saturated" || ae.RetryAfter != 2*time.Second || !strings.Contains(ae.Message, "saturated") ||
		!errors.Is(err, client.ErrSaturated) || !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("429: %v (%+v)", err, ae)
	}
}
