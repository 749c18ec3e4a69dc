package orchhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchhost"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// tracedPool is a pool whose orchestrator records its spans.
func tracedPool(t *testing.T) (*httptest.Server, *tracetest.SpanRecorder) {
	t.Helper()
	reg := tools.NewRegistry()
	obj := json.RawMessage(`{"type":"object"}`)
	for _, tl := range []tools.Tool{
		{Name: "plain", Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ok"), nil }},
		{Name: "search", Idempotent: true, Cache: &tools.CachePolicy{TTL: time.Minute},
			Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("found"), nil }},
		{Name: "broken", Handler: func(context.Context, json.RawMessage) (tools.Output, error) {
			return tools.Output{}, classify.Permanent(errors.New("the record does not exist"))
		}},
	} {
		tl.Description, tl.InputSchema = "a test tool", obj
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	pool := pooltest.Start(t)
	pooltest.StartServer(t, pool.Srv.ClientURL(), reg)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	o := pooltest.StartOrchestrator(t, natstest.Connect(t, pool.Srv.ClientURL()), discovery.RegistryCatalog(reg),
		func(c *orchhost.Config) { c.Tracer = tracing.NewTracer(tp) })
	srv := httptest.NewServer(o.Handler())
	t.Cleanup(srv.Close)
	return srv, rec
}

func spanAttr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.Emit()
		}
	}
	return ""
}

func spanEvents(s sdktrace.ReadOnlySpan, name string) int {
	n := 0
	for _, e := range s.Events() {
		if e.Name == name {
			n++
		}
	}
	return n
}

// endedSpans waits for the spans named to end (a server span ends after
// its answer is written) and returns them by name.
func endedSpans(t *testing.T, rec *tracetest.SpanRecorder, names ...string) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	got := map[string]sdktrace.ReadOnlySpan{}
	natstest.Eventually(t, 10*time.Second, fmt.Sprintf("spans %v ended", names), func() bool {
		for _, s := range rec.Ended() {
			got[s.Name()] = s
		}
		for _, n := range names {
			if got[n] == nil {
				return false
			}
		}
		return true
	})
	return got
}

// TestHTTPRequestTrace: one POST /v1/tool_calls of three calls is one
// trace: the request's server span under the caller's traceparent, and a
// span per call under it with the GenAI attributes, the cache's event
// for the caching tool and error.type for the failure; the answer's
// traceparent names the request's span.
func TestHTTPRequestTrace(t *testing.T) {
	srv, rec := tracedPool(t)
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	body := `{"role":"assistant","content":[
		{"type":"tool_use","id":"toolu_t1","name":"plain","input":{}},
		{"type":"tool_use","id":"toolu_t2","name":"search","input":{"q":"x"}},
		{"type":"tool_use","id":"toolu_t3","name":"broken","input":{}}]}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tool_calls", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", incoming)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	spans := endedSpans(t, rec, "POST /v1/tool_calls", "call plain", "call search", "call broken")
	root := spans["POST /v1/tool_calls"]
	want, _ := tracing.ParseTraceparent(incoming)
	if root.SpanKind() != trace.SpanKindServer || root.Parent().SpanID() != want.SpanID() || root.SpanContext().TraceID() != want.TraceID() {
		t.Errorf("request span: kind %v parent %v trace %v", root.SpanKind(), root.Parent().SpanID(), root.SpanContext().TraceID())
	}
	if got := spanAttr(root, "http.response.status_code"); got != "200" {
		t.Errorf("http.response.status_code = %q", got)
	}
	if got := resp.Header.Get("traceparent"); got != tracing.Traceparent(root.SpanContext()) {
		t.Errorf("answer's traceparent %q, want the request span's %q", got, tracing.Traceparent(root.SpanContext()))
	}
	for _, name := range []string{"plain", "search", "broken"} {
		s := spans["call "+name]
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanContext().TraceID() != want.TraceID() {
			t.Errorf("call %s: not a child of the request's span", name)
		}
		if spanAttr(s, tracing.GenAIToolName) != name || !strings.HasPrefix(spanAttr(s, tracing.GenAIToolCallID), "toolu_t") ||
			spanAttr(s, tracing.CallKey) == "" || spanAttr(s, tracing.Instance) == "" {
			t.Errorf("call %s: attributes %v", name, s.Attributes())
		}
		if spanEvents(s, "published") != 1 || spanEvents(s, "result") != 1 {
			t.Errorf("call %s: events %v", name, s.Events())
		}
	}
	if spanEvents(spans["call search"], "cache") != 1 {
		t.Errorf("the caching tool's call has no cache event: %v", spans["call search"].Events())
	}
	broken := spans["call broken"]
	if broken.Status().Code != codes.Error || !strings.HasPrefix(spanAttr(broken, tracing.ErrorType), string(envelope.ClassPermanent)) {
		t.Errorf("the failed call: status %v, error.type %q", broken.Status(), spanAttr(broken, tracing.ErrorType))
	}
}

// TestMCPCallTrace: an MCP tools/call, on the fast path and through the
// go-sdk, is a server span "tools/call <tool>" under _meta's traceparent,
// the parent of the call's span.
func TestMCPCallTrace(t *testing.T) {
	srv, rec := tracedPool(t)
	const incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},"traceparent":"` + incoming + `"}`
	for i, extra := range []string{"", `,"x":1`} { // the fast path, then the go-sdk (a key it ignores)
		rec.Reset()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"plain","arguments":{},%s%s}}`, i+1, meta, extra)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "plain"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok"`) {
			t.Fatalf("case %d: %d %s", i, resp.StatusCode, b)
		}
		spans := endedSpans(t, rec, "tools/call plain", "call plain")
		server, call := spans["tools/call plain"], spans["call plain"]
		want, _ := tracing.ParseTraceparent(incoming)
		if server.SpanKind() != trace.SpanKindServer || server.Parent().SpanID() != want.SpanID() {
			t.Errorf("case %d: server span kind %v parent %v", i, server.SpanKind(), server.Parent().SpanID())
		}
		if call.Parent().SpanID() != server.SpanContext().SpanID() || call.SpanContext().TraceID() != want.TraceID() {
			t.Errorf("case %d: the call's span is not the tools/call span's child", i)
		}
	}
}

// TestUntracedHostRecordsNothing: without a tracer the answer keeps the
// caller's traceparent, as before.
func TestUntracedHostKeepsTraceparent(t *testing.T) {
	reg := tools.NewRegistry()
	if err := reg.Register(tools.Tool{Name: "plain", Description: "a test tool", InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ok"), nil }}); err != nil {
		t.Fatal(err)
	}
	pool := pooltest.Start(t)
	pooltest.StartServer(t, pool.Srv.ClientURL(), reg)
	o := pooltest.StartOrchestrator(t, natstest.Connect(t, pool.Srv.ClientURL()), discovery.RegistryCatalog(reg))
	srv := httptest.NewServer(o.Handler())
	t.Cleanup(srv.Close)
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tool_calls",
		strings.NewReader(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_u1","name":"plain","input":{}}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", incoming)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("traceparent"); resp.StatusCode != http.StatusOK || got != incoming {
		t.Fatalf("%d, traceparent %q; want 200 and the caller's", resp.StatusCode, got)
	}
}

// TestAsyncCallTrace: an async call's span is a child of the span of the
// request that created its task (the task keeps that span's context), and
// a GET of the task is a span of its own route.
func TestAsyncCallTrace(t *testing.T) {
	srv, rec := tracedPool(t)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tool_calls",
		strings.NewReader(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a1","name":"plain","input":{}}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted || loc == "" {
		t.Fatalf("%d, Location %q; want 202 and the task's URL", resp.StatusCode, loc)
	}
	spans := endedSpans(t, rec, "POST /v1/tool_calls", "call plain")
	post, call := spans["POST /v1/tool_calls"], spans["call plain"]
	if call.Parent().SpanID() != post.SpanContext().SpanID() || call.SpanContext().TraceID() != post.SpanContext().TraceID() {
		t.Errorf("the async call's span is not a child of the request that created it")
	}
	if got := resp.Header.Get("traceparent"); got != tracing.Traceparent(post.SpanContext()) {
		t.Errorf("202's traceparent %q, want the request span's", got)
	}
	get, err := http.Get(srv.URL + loc + "?wait=5s")
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", loc, get.StatusCode)
	}
	endedSpans(t, rec, "GET /v1/tool_calls/{id}")
}
