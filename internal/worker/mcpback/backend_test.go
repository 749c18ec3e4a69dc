package mcpback_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/mcpwire"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/worker/mcpback"
	"github.com/toolpool/toolpool/internal/worker/mcpback/internal/mcptest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// testBundle is a pool whose worker serves the demo tools and the tools of
// the MCP servers given.
type testBundle struct {
	set *mcpback.Set
	reg *tools.Registry
	d   *dispatch.Dispatcher
}

func setup(t *testing.T, cfgs ...mcpback.Config) *testBundle {
	t.Helper()
	srv, nc, _ := natstest.StartProvisioned(t)
	reg, set := startSet(t, cfgs...)
	pooltest.StartServer(t, srv.ClientURL(), reg)
	orch := pooltest.StartOrchestrator(t, nc, discovery.RegistryCatalog(reg))
	return &testBundle{set: set, reg: reg, d: orch.Dispatcher()}
}

// startSet starts a Set of cfgs, logging to the test, registering its
// tools in a registry of the demo tools. Start a worker after it: the Set
// stops after the worker.
func startSet(t *testing.T, cfgs ...mcpback.Config) (*tools.Registry, *mcpback.Set) {
	t.Helper()
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	for i := range cfgs {
		cfgs[i].Logger = natstest.Logger(t)
	}
	set, err := mcpback.NewSet(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := set.Start(ctx, reg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Stop(context.Background()) }) // after the worker's stop
	return reg, set
}

var callSeq atomic.Int64

// call runs one call through the pool, with an id of its own (a stored
// result answers a call id seen before).
func (b *testBundle) call(t *testing.T, tool, input string) envelope.Result {
	t.Helper()
	id := fmt.Sprintf("toolu_%s_%d", tool, callSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.d.Dispatch(ctx, "session", []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: tool, Input: json.RawMessage(input)}})
	if err != nil {
		t.Fatalf("Dispatch %s: %v", tool, err)
	}
	return res[0]
}

func stdioConfig(args ...string) mcpback.Config {
	return mcpback.Config{Name: "gotest", Command: append([]string{serverBin}, args...), Prefix: "go_",
		Template: tools.Tool{Timeout: 10 * time.Second, Retry: classify.Policy{MaxAttempts: 4, BaseDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond}}}
}

// httpServer serves mcptest's server over streamable HTTP on loopback;
// requests without the bearer token are refused, and a request whose body
// says "ratelimited" is answered 429 with Retry-After: 7.
func httpServer(t *testing.T, opts mcptest.Options) string { return gatedHTTPServer(t, opts, nil) }

// gatedHTTPServer is httpServer, answering 503 to every request while up
// is false (nil: always up).
func gatedHTTPServer(t *testing.T, opts mcptest.Options, up *atomic.Bool) string {
	t.Helper()
	s := mcptest.NewServer(opts)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if up != nil && !up.Load() {
			http.Error(w, "not up yet", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("ratelimited")) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func httpConfig(url string) mcpback.Config {
	return mcpback.Config{Name: "gohttp", URL: url, Prefix: "web_", Header: http.Header{"Authorization": {"Bearer s3cret"}},
		Secrets: []string{"s3cret"}, Sessions: 2, Template: tools.Tool{Timeout: 10 * time.Second}}
}

// checkResults: a tool's result and its isError reach the pool's caller,
// the error with the server's own text, permanent, after one attempt.
func checkResults(t *testing.T, b *testBundle, prefix string) {
	t.Helper()
	res := b.call(t, prefix+"echo", `{"text":"hello through the pool"}`)
	if res.IsError || res.Content.Text() != "hello through the pool" {
		t.Fatalf("echo: %+v", res)
	}
	res = b.call(t, prefix+"fail", `{"text":"the widget is jammed"}`)
	if !res.IsError || res.Class != envelope.ClassPermanent || res.Attempts != 1 || !strings.Contains(res.Content.Text(), "the widget is jammed") {
		t.Fatalf("fail: %+v %q", res, res.Content.Text())
	}
	res = b.call(t, prefix+"echo", `{"text": 5}`)
	if !res.IsError || res.Class != envelope.ClassValidation || !strings.Contains(res.Content.Text(), "text") {
		t.Fatalf("echo with a bad argument: %+v %q", res, res.Content.Text())
	}
	res = b.call(t, prefix+"media", `{}`)
	if res.IsError || !slices.EqualFunc(res.Content, mcpwire.ToPool(mcptest.Media()), blockEqual) {
		t.Fatalf("media: %+v", res.Content)
	}
	if res := b.call(t, "echo", `{"text":"demo"}`); res.IsError || res.Content.Text() != "demo" {
		t.Fatalf("the demo echo: %+v", res)
	}
}

func blockEqual(a, b envelope.Block) bool {
	if a.Type != b.Type || a.Text != b.Text {
		return false
	}
	if len(a.Raw) == 0 && len(b.Raw) == 0 {
		return true
	}
	var x, y any
	return json.Unmarshal(a.Raw, &x) == nil && json.Unmarshal(b.Raw, &y) == nil && jsonEqual(x, y)
}

func jsonEqual(x, y any) bool {
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func TestStdioServerThroughThePool(t *testing.T) {
	t.Parallel()
	b := setup(t, stdioConfig())
	rt, ok := b.reg.Lookup("go_echo")
	if !ok || rt.Description != "Returns its text." || !rt.Idempotent || rt.Timeout != 10*time.Second {
		t.Fatalf("go_echo registered as %+v", rt)
	}
	checkResults(t, b, "go_")
}

func TestHTTPServerThroughThePool(t *testing.T) {
	t.Parallel()
	b := setup(t, httpConfig(httpServer(t, mcptest.Options{})))
	checkResults(t, b, "web_")
}

// TestStdioServerKilledMidCall: the server dies during a call; the call
// fails transiently, the server is restarted, and the retry succeeds.
func TestStdioServerKilledMidCall(t *testing.T) {
	t.Parallel()
	b := setup(t, stdioConfig())
	marker := filepath.Join(t.TempDir(), "crashed")
	res := b.call(t, "go_crash_once", `{"marker":`+quote(marker)+`}`)
	if res.IsError || res.Content.Text() != "survived" || res.Attempts < 2 {
		t.Fatalf("crash_once: %+v %q", res, res.Content.Text())
	}
}

// TestServerThatNeverStarts: the worker serves its other tools; the
// server's check says why it is missing, and nothing of it is registered.
func TestServerThatNeverStarts(t *testing.T) {
	t.Parallel()
	b := setup(t, stdioConfig("--fail-start"))
	if res := b.call(t, "echo", `{"text":"still here"}`); res.IsError || res.Content.Text() != "still here" {
		t.Fatalf("demo echo: %+v", res)
	}
	for _, name := range b.reg.Names() {
		if strings.HasPrefix(name, "go_") {
			t.Fatalf("registered %s of a server that did not start", name)
		}
	}
	err := b.set.Checks()[0].Func(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refusing to start") {
		t.Fatalf("check: %v", err)
	}
	if res := b.call(t, "go_echo", `{"text":"x"}`); !res.IsError || res.Code != classify.CodeUnknownTool {
		t.Fatalf("a tool of the missing server: %+v", res)
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// startBackend starts one Backend for a test of its handlers.
func startBackend(t testing.TB, cfg mcpback.Config) *mcpback.Backend {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = natstest.Logger(t)
	}
	b, err := mcpback.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b
}

func handler(t testing.TB, b *mcpback.Backend, name string) tools.Handler {
	t.Helper()
	for _, tl := range b.Tools() {
		if tl.Name == name {
			return tl.Handler
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// TestProgressReachesReportProgress: the server's notifications/progress
// of a call reach tools.ReportProgress of that call, on both transports.
func TestProgressReachesReportProgress(t *testing.T) {
	t.Parallel()
	for _, cfg := range []mcpback.Config{stdioConfig(), httpConfig(httpServer(t, mcptest.Options{}))} {
		b := startBackend(t, cfg)
		var mu sync.Mutex
		var got []tools.Progress
		ctx := tools.WithProgressReporter(context.Background(), func(p tools.Progress) {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		})
		out, err := handler(t, b, cfg.Prefix+"sleep")(ctx, json.RawMessage(`{"ms":30,"steps":3}`))
		if err != nil || out.Content.Text() != "slept" {
			t.Fatalf("%s sleep: %v %+v", cfg.Name, err, out)
		}
		mu.Lock()
		want := []tools.Progress{{Progress: 1, Total: 3, Message: "step"}, {Progress: 2, Total: 3, Message: "step"}, {Progress: 3, Total: 3, Message: "step"}}
		// The SDK may hand a notification to its handler after the result
		// has arrived, when nobody listens any more: the last ones may be
		// missing, never out of order.
		if len(got) == 0 || !slices.Equal(got, want[:len(got)]) {
			t.Errorf("%s progress: %+v, want %+v", cfg.Name, got, want)
		}
		mu.Unlock()
	}
}

// TestTraceparentReachesServer: the call's traceparent (with tracing on,
// its execute_tool span's) goes to the MCP server in _meta.traceparent
// (SEP-414), on both transports; a call without one sends none.
func TestTraceparentReachesServer(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, cfg := range []mcpback.Config{stdioConfig(), httpConfig(httpServer(t, mcptest.Options{}))} {
		b := startBackend(t, cfg)
		h := handler(t, b, cfg.Prefix+"traceparent")
		out, err := h(tools.WithCallInfo(context.Background(), tools.CallInfo{Traceparent: tp}), json.RawMessage(`{}`))
		if err != nil || out.Content.Text() != "traceparent="+tp {
			t.Errorf("%s: %v %q, want the call's traceparent", cfg.Name, err, out.Content.Text())
		}
		out, err = h(context.Background(), json.RawMessage(`{}`))
		if err != nil || out.Content.Text() != "traceparent=" {
			t.Errorf("%s without a traceparent: %v %q", cfg.Name, err, out.Content.Text())
		}
	}
}

// TestCancelReachesServer: when the call's context ends, the server's
// handler sees its own context cancelled (notifications/cancelled).
func TestCancelReachesServer(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{}, 1)
	b := startBackend(t, httpConfig(httpServer(t, mcptest.Options{Cancelled: cancelled})))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := handler(t, b, "web_sleep")(ctx, json.RawMessage(`{"ms":60000}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sleep past its context: %v", err)
	}
	<-cancelled // the test's deadline bounds the wait
}

// startListening starts a Backend of an HTTP test server whose OnChange
// calls are sent on changed.
func startListening(t *testing.T) (b *mcpback.Backend, changed <-chan []tools.Tool) {
	t.Helper()
	ch := make(chan []tools.Tool, 1)
	cfg := httpConfig(httpServer(t, mcptest.Options{}))
	cfg.OnChange = func(ts []tools.Tool) { ch <- ts }
	return startBackend(t, cfg), ch
}

// TestListChanged: a server that changes a tool's description and schema
// makes OnChange hear of it, and calls are checked against the new schema.
func TestListChanged(t *testing.T) {
	t.Parallel()
	b, changed := startListening(t)
	if _, err := handler(t, b, "web_redescribe")(context.Background(), json.RawMessage(`{"text":"Echoes five letters."}`)); err != nil {
		t.Fatal(err)
	}
	ts := <-changed
	i := slices.IndexFunc(ts, func(tl tools.Tool) bool { return tl.Name == "web_echo" })
	if i < 0 || ts[i].Description != "Echoes five letters." || !strings.Contains(string(ts[i].InputSchema), "maxLength") {
		t.Fatalf("after list_changed: %+v", ts)
	}
	_, err := handler(t, b, "web_echo")(context.Background(), json.RawMessage(`{"text":"too long"}`))
	var ve *classify.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("echo against the new schema: %v", err)
	}
}

// TestContentRoundTrip: MCP content → pool blocks → MCP content loses
// nothing of the blocks.
func TestContentRoundTrip(t *testing.T) {
	t.Parallel()
	in := mcptest.Media()
	out := mcpwire.FromPool(mcpwire.ToPool(in))
	if !jsonEqual(in, out) {
		a, _ := json.Marshal(in)
		b, _ := json.Marshal(out)
		t.Fatalf("round trip:\n%s\n%s", a, b)
	}
	if img := mcpwire.ToPool(in)[1]; !strings.Contains(string(img.Raw), `"media_type":"image/png"`) {
		t.Errorf("image block: %s", img.Raw)
	}
}

// TestSecretsNotInErrors: a server that refuses the request (wrong
// token) fails Start with an error that holds no header value.
func TestSecretsNotInErrors(t *testing.T) {
	t.Parallel()
	cfg := httpConfig(httpServer(t, mcptest.Options{}))
	cfg.Header = http.Header{"Authorization": {"Bearer wrong-s3cret"}}
	cfg.Secrets = []string{"wrong-s3cret"}
	cfg.Logger = natstest.Logger(t)
	b, err := mcpback.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop(context.Background())
	err = b.Start(context.Background())
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Start: %v", err)
	}
	if cerr := b.Check().Func(context.Background()); cerr == nil {
		t.Fatal("the check of a server that did not start holds")
	}
}

// TestListChangedRemoval: a tool the server stops listing is no longer
// served (a permanent error) nor given to OnChange.
func TestListChangedRemoval(t *testing.T) {
	t.Parallel()
	b, changed := startListening(t)
	fail := handler(t, b, "web_fail") // as the registry holds it
	if _, err := handler(t, b, "web_drop")(context.Background(), json.RawMessage(`{"text":"fail"}`)); err != nil {
		t.Fatal(err)
	}
	ts := <-changed
	if slices.ContainsFunc(ts, func(tl tools.Tool) bool { return tl.Name == "web_fail" }) || len(ts) != len(b.Tools()) {
		t.Fatalf("after the removal: %v", ts)
	}
	_, err := fail(context.Background(), json.RawMessage(`{"text":"x"}`))
	if !errors.Is(err, mcpback.ErrToolGone) || classify.Classify(err).Class != envelope.ClassPermanent {
		t.Fatalf("a call of the removed tool: %v", err)
	}
}

// TestRateLimitKeepsRetryAfter: an HTTP server's 429 is the pool's rate
// limit, with its Retry-After (for the retry's delay and
// pause_on_rate_limit_above), not a bare transient error.
func TestRateLimitKeepsRetryAfter(t *testing.T) {
	t.Parallel()
	b := startBackend(t, httpConfig(httpServer(t, mcptest.Options{})))
	_, err := handler(t, b, "web_echo")(context.Background(), json.RawMessage(`{"text":"ratelimited"}`))
	d := classify.Classify(err)
	if d.Code != classify.CodeHTTP429 || d.RetryAfter != 7*time.Second || !d.Retryable {
		t.Fatalf("429: %v gives %+v", err, d)
	}
	if out, err := handler(t, b, "web_echo")(context.Background(), json.RawMessage(`{"text":"fine again"}`)); err != nil || out.Content.Text() != "fine again" {
		t.Fatalf("after the 429: %v %+v", err, out)
	}
}

// TestServerGoneIsTransient: calls to an HTTP server that went away fail
// as transient errors, retried by the pool, with a cause for the model.
func TestServerGoneIsTransient(t *testing.T) {
	t.Parallel()
	s := mcptest.NewServer(mcptest.Options{})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	b := startBackend(t, mcpback.Config{Name: "gone", URL: ts.URL, Prefix: "gone_"})
	echo := handler(t, b, "gone_echo")
	if _, err := echo(context.Background(), json.RawMessage(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	ts.CloseClientConnections()
	ts.Close()
	for ss := range s.Sessions() { // what the client can no longer end
		_ = ss.Close()
	}
	_, err := echo(context.Background(), json.RawMessage(`{"text":"x"}`))
	d := classify.Classify(err)
	if err == nil || !d.Retryable || d.Class != envelope.ClassTransient || !strings.Contains(d.Cause, "MCP server") {
		t.Fatalf("a call after the server went away: %v gives %+v", err, d)
	}
}
