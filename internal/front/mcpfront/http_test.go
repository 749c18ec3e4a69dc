package mcpfront_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/front/mcpfront"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitLong = 30 * time.Second

// testToken is the MCP bearer token of these tests.
const testToken = "test-token-0123456789abcdef"

// pool is a pool with a live catalog, served over HTTP with /mcp.
type pool struct {
	url  string // the /mcp endpoint
	nats string
	orch *pooltest.Orchestrator
}

// startPool starts an embedded server, a worker announcing the demo tools,
// an orchestrator on the live catalog and its HTTP server on loopback.
func startPool(t *testing.T, mod func(*pooltest.OrchestratorConfig)) *pool {
	t.Helper()
	srv, nc, _ := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	pooltest.StartServer(t, srv.ClientURL(), reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false })
	orch := pooltest.StartOrchestrator(t, nc, nil, func(c *pooltest.OrchestratorConfig) {
		if mod != nil {
			mod(c)
		}
	})
	hs, err := orch.NewHTTPServer(httpapi.ServerConfig{Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		orch.MCP().EndStreams()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := hs.Stop(ctx); err != nil {
			t.Errorf("http server Stop: %v", err)
		}
	})
	return &pool{url: "http://" + ln.Addr().String() + "/mcp", nats: srv.ClientURL(), orch: orch}
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect opens a go-sdk client session to url with token (none: "").
func connect(t *testing.T, url, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if token != "" {
		hc.Transport = bearer{token: token, next: hc.Transport}
	}
	t.Cleanup(hc.CloseIdleConnections)
	c := mcp.NewClient(&mcp.Implementation{Name: "toolpool-test"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content block %T, want text", c)
		}
		parts = append(parts, tc.Text)
	}
	return strings.Join(parts, "\n")
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// TestHTTP: a go-sdk client over streamable HTTP lists the live tools
// with their hints, calls one, gets isError results for a failing tool and
// a bad input (the pool's texts), a protocol error for an unknown tool and
// for arguments that are not an object, and list_changed when a worker
// starts and stops serving a tool.
func TestHTTP(t *testing.T) {
	t.Parallel()
	p := startPool(t, func(c *pooltest.OrchestratorConfig) { c.MCP.Token = testToken })
	changed := make(chan struct{}, 16)
	cs, err := connect(t, p.url, testToken, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
		if tl.Name == "echo" {
			if !strings.HasPrefix(tl.Description, "Returns the given text unchanged.") {
				t.Errorf("echo's description %q", tl.Description)
			}
			if tl.Annotations == nil || !tl.Annotations.IdempotentHint {
				t.Errorf("echo's annotations %+v, want idempotentHint", tl.Annotations)
			}
			schema, _ := json.Marshal(tl.InputSchema)
			if !strings.Contains(string(schema), `"required":["text"]`) {
				t.Errorf("echo's input schema %s", schema)
			}
		}
	}
	if !slices.Equal(names, []string{"echo", "flaky", "sleep"}) {
		t.Fatalf("tools %v", names)
	}

	res, err := call(t, cs, "echo", map[string]any{"text": "hello"})
	if err != nil || res.IsError || text(t, res) != "hello" {
		t.Fatalf("echo: %+v, %v", res, err)
	}

	res, err = call(t, cs, "flaky", map[string]any{"fail": "404", "times": 1})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), "404") {
		t.Fatalf("flaky 404: %+v, %v", res, err)
	}
	if res.Meta["io.toolpool/class"] != "permanent" {
		t.Errorf("flaky 404 meta %v", res.Meta)
	}

	res, err = call(t, cs, "echo", map[string]any{"text": 5})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), "text") {
		t.Fatalf("echo with a number: %+v, %v", res, err)
	}
	if res.Meta["io.toolpool/class"] != "validation" {
		t.Errorf("validation meta %v", res.Meta)
	}

	_, err = call(t, cs, "nope", map[string]any{})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "echo") {
		t.Fatalf("unknown tool: %v; want -32602 listing the tools", err)
	}
	_, err = call(t, cs, "echo", []int{1})
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "an array, not a JSON object") {
		t.Fatalf("arguments not an object: %v", err)
	}

	// A worker starts serving a new tool, then stops.
	reg := tools.NewRegistry()
	reg.MustRegister(tools.Tool{Name: "extra", InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("extra"), nil }})
	extra := pooltest.StartServer(t, p.nats, reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false })
	hasExtra := func() bool {
		lt, err := cs.ListTools(ctx, nil)
		return err == nil && slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "extra" })
	}
	waitFor(t, changed, "list_changed after a worker started", hasExtra)
	res, err = call(t, cs, "extra", nil)
	if err != nil || res.IsError || text(t, res) != "extra" {
		t.Fatalf("extra: %+v, %v", res, err)
	}
	if err := extra.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, "list_changed after the worker stopped", func() bool { return !hasExtra() })
}

// waitFor waits for notifications on changed until cond holds.
func waitFor(t *testing.T, changed <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		select {
		case <-changed:
			if cond() {
				return
			}
		case <-deadline:
			t.Fatalf("%s: not notified", what)
		}
	}
}

// TestToken: without the token (or with a wrong one) /mcp answers 401; an
// API key is let in too, and narrows the tools to its own.
func TestToken(t *testing.T) {
	t.Parallel()
	keys, err := apikey.Parse(nil, []byte(`[{tenant: team-a, key: "key-a-0123456789abcdef", tools: [echo], weight: 3}]`), "keys")
	if err != nil {
		t.Fatal(err)
	}
	p := startPool(t, func(c *pooltest.OrchestratorConfig) {
		c.MCP.Token = testToken
		c.API.Keys = keys
	})
	for _, token := range []string{"", "wrong-token-0123456789"} {
		resp := post(t, p.url, token, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if resp.status != http.StatusUnauthorized || !strings.HasPrefix(resp.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("token %q: %d %s", token, resp.status, resp.body)
		}
	}
	if _, err := connect(t, p.url, "", nil); err == nil {
		t.Error("a client without the token connected")
	}
	cs, err := connect(t, p.url, "key-a-0123456789abcdef", nil)
	if err != nil {
		t.Fatal(err)
	}
	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(lt.Tools) != 1 || lt.Tools[0].Name != "echo" {
		t.Fatalf("the key's tools: %+v, %v", lt, err)
	}
	_, err = call(t, cs, "sleep", map[string]any{"ms": 1})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "echo") || strings.Contains(je.Message, "flaky") {
		t.Fatalf("a tool the key may not call: %v", err)
	}
	res, err := call(t, cs, "echo", map[string]any{"text": "a"})
	if err != nil || res.IsError {
		t.Fatalf("echo with the key: %+v, %v", res, err)
	}
	// The call went through the scheduler as the key's tenant, with the
	// tenant's weight.
	var keyOf []sched.KeyStats
	for _, ts := range p.orch.Dispatcher().SchedSnapshot().Tools {
		if ts.Tool == "echo" {
			keyOf = ts.Keys
		}
	}
	if len(keyOf) != 1 || keyOf[0].Tenant != "team-a" || keyOf[0].Weight != 3 || keyOf[0].Served != 1 {
		t.Errorf("the scheduler's keys of echo: %+v, want team-a of weight 3, 1 served", keyOf)
	}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, url, token, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// TestBadInput: what is not JSON-RPC gets the JSON-RPC error the spec
// names, with an HTTP error status; an unknown method is answered
// "method not found"; a body over the limit is refused; nothing hangs.
func TestBadInput(t *testing.T) {
	t.Parallel()
	p := startPool(t, func(c *pooltest.OrchestratorConfig) { c.MCP.MaxBodyBytes = 1 << 10 })
	for _, tc := range []struct {
		name, body string
		status     int
		code       int64
		id         any
	}{
		{"not JSON", `{"jsonrpc":"2.0",`, http.StatusBadRequest, jsonrpc.CodeParseError, nil},
		{"not an object", `42`, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, nil},
		{"no jsonrpc", `{"id":1,"method":"ping"}`, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, 1.0},
		{"bad method", `{"jsonrpc":"2.0","id":2,"method":7}`, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, 2.0},
		{"empty batch", `[]`, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, nil},
		{"unknown method", `{"jsonrpc":"2.0","id":"x","method":"tools/frobnicate","params":{}}`, http.StatusOK, jsonrpc.CodeMethodNotFound, "x"},
		{"too large", `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"pad":"` + strings.Repeat("x", 2<<10) + `"}}`,
			http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, nil},
	} {
		got := post(t, p.url, "", tc.body)
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
			ID      any    `json:"id"`
			Error   struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(got.body), &msg); err != nil || got.status != tc.status ||
			msg.JSONRPC != "2.0" || msg.Error.Code != tc.code || msg.ID != tc.id {
			t.Errorf("%s: %d %s; want %d with code %d, id %v", tc.name, got.status, got.body, tc.status, tc.code, tc.id)
		}
	}
	// An unknown notification is dropped, as JSON-RPC has it.
	if got := post(t, p.url, "", `{"jsonrpc":"2.0","method":"notifications/whatever"}`); got.status != http.StatusAccepted {
		t.Errorf("unknown notification: %d %s", got.status, got.body)
	}
	// The server still serves.
	if _, err := connect(t, p.url, "", nil); err != nil {
		t.Fatal(err)
	}
}

// TestSessionAdvice: the host's conversation is the pool's session: after
// three failures in a row in one its result says to stop retrying;
// another's first failure does not. A session of 2025-11-25 is its
// session id; a 2026-07-28 client (no session) is its Toolpool-Session
// header, or else its identity (the credential and its clientInfo).
func TestSessionAdvice(t *testing.T) {
	t.Parallel()
	p := startPool(t, nil)
	for _, tc := range []struct {
		name          string
		first, second dialOptions
	}{
		{"2025-11-25 sessions", dialOptions{version: "2025-11-25"}, dialOptions{version: "2025-11-25"}},
		{"2026-07-28 Toolpool-Session", dialOptions{poolSession: "conv-1"}, dialOptions{poolSession: "conv-2"}},
		{"2026-07-28 client identity", dialOptions{name: "host-a"}, dialOptions{name: "host-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := dial(t, p.url, tc.first)
			advice := "times in a row in this session"
			fail := func(cs *mcp.ClientSession) string {
				t.Helper()
				res, err := call(t, cs, "flaky", map[string]any{"fail": "404", "times": 1})
				if err != nil || !res.IsError {
					t.Fatalf("flaky 404: %+v, %v", res, err)
				}
				return text(t, res)
			}
			for i := 1; i <= 2; i++ {
				if got := fail(first); strings.Contains(got, advice) {
					t.Fatalf("failure %d already advises: %q", i, got)
				}
			}
			if got := fail(first); !strings.Contains(got, advice) {
				t.Errorf("the third failure in a row does not advise: %q", got)
			}
			if got := fail(dial(t, p.url, tc.second)); strings.Contains(got, advice) {
				t.Errorf("another conversation's first failure advises: %q", got)
			}
			// The same conversation again (a new connection: for
			// 2026-07-28 nothing tells the two apart) goes on advising.
			if tc.first.version == "" {
				if got := fail(dial(t, p.url, tc.first)); !strings.Contains(got, advice) {
					t.Errorf("the same conversation's fourth failure does not advise: %q", got)
				}
			}
		})
	}
}

// /mcp takes the bodies the HTTP API takes: the two limits are one.
func TestMaxBodyBytesIsTheHTTPAPIs(t *testing.T) {
	t.Parallel()
	if mcpfront.MaxBodyBytesDefault != httpapi.MaxBodyBytesDefault {
		t.Errorf("mcpfront.MaxBodyBytesDefault %d, httpapi.MaxBodyBytesDefault %d", mcpfront.MaxBodyBytesDefault, httpapi.MaxBodyBytesDefault)
	}
}
