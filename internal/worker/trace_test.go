package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/netguard"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// spans is an in-memory span exporter: every span ended is kept.
type spans struct {
	rec *tracetest.SpanRecorder
}

// newSpans returns a tracer recording into an in-memory recorder, shut
// down when the test ends.
func newSpans(t *testing.T) (*tracing.Tracer, *spans) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.NewTracer(tp), &spans{rec: rec}
}

// named returns the ended spans called name, in the order they ended.
func (s *spans) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.rec.Ended() {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

// await waits until n spans called name have ended, and returns them.
func (s *spans) await(t *testing.T, name string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	natstest.Eventually(t, waitLong, fmt.Sprintf("%d %q spans", n, name), func() bool {
		got = s.named(name)
		return len(got) >= n
	})
	return got
}

// attr returns the span's attribute key; !ok when it has none.
func attr(sp sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range sp.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// event returns the span's event name; !ok when it has none.
func event(sp sdktrace.ReadOnlySpan, name string) (sdktrace.Event, bool) {
	for _, e := range sp.Events() {
		if e.Name == name {
			return e, true
		}
	}
	return sdktrace.Event{}, false
}

func eventAttr(e sdktrace.Event, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range e.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// The orchestrator's "call <tool>" span, as the call's traceparent names it.
const callTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func withTraceparent(tp string) func(*envelope.Call) {
	return func(c *envelope.Call) { c.Traceparent = tp }
}

// seen is what a handler saw of its context, per attempt.
type seen struct {
	mu  sync.Mutex
	ctx map[int]trace.SpanContext // the span in the handler's ctx
	tp  map[int]string            // CallInfo.Traceparent
}

func (s *seen) record(ctx context.Context) {
	ci, _ := tools.CallInfoFrom(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx[ci.Attempt] = trace.SpanContextFromContext(ctx)
	s.tp[ci.Attempt] = ci.Traceparent
}

func newSeen() *seen { return &seen{ctx: map[int]trace.SpanContext{}, tp: map[int]string{}} }

// A call that fails transiently once and then succeeds gives two
// execute_tool spans, attempts 1 and 2, both children of the call's
// traceparent: the first with error.type transient.http_503, status Error
// and a retry event carrying the delay; the second a success. The first
// delivery also has a queued span from the publish to the delivery. The
// handler's context carries its attempt's span, and CallInfo.Traceparent
// is that span's.
func TestTraceRetryThenSuccess(t *testing.T) {
	t.Parallel()
	s := newSeen()
	var n atomic.Int32
	wobbly := tool("wobbly", func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
		s.record(ctx)
		if n.Add(1) == 1 {
			return tools.Output{}, &classify.HTTPError{StatusCode: http.StatusServiceUnavailable}
		}
		return tools.Text("ok"), nil
	})
	b := setup(t, wobbly)
	tracer, rec := newSpans(t)
	b.start(t, func(c *worker.Config) { c.Tracer, c.WorkerID, c.Rand = tracer, "traced-1", fixedRand(0.5) })

	published := time.Now()
	id := b.publish(t, "wobbly", `{}`, withTraceparent(callTraceparent), func(c *envelope.Call) {
		c.Session, c.Tenant = "sess-1", "acme"
	})
	if r := b.results.await(t, id); r.IsError || r.Attempts != 2 {
		t.Fatalf("result %+v; want a success on attempt 2", r)
	}
	got := rec.await(t, "execute_tool wobbly", 2)
	parent, _ := tracing.ParseTraceparent(callTraceparent)
	slices.SortFunc(got, func(a, b sdktrace.ReadOnlySpan) int {
		x, _ := attr(a, tracing.Attempt)
		y, _ := attr(b, tracing.Attempt)
		return int(x.AsInt64() - y.AsInt64())
	})
	for i, sp := range got {
		n := i + 1
		if sp.Parent().SpanID() != parent.SpanID() || sp.SpanContext().TraceID() != parent.TraceID() || !sp.Parent().IsRemote() {
			t.Errorf("attempt %d: parent %v in trace %v; want the call's span %v", n, sp.Parent().SpanID(), sp.SpanContext().TraceID(), parent.SpanID())
		}
		if sp.SpanKind() != trace.SpanKindInternal {
			t.Errorf("attempt %d: kind %v", n, sp.SpanKind())
		}
		for key, want := range map[attribute.Key]any{
			tracing.GenAIOperationName: "execute_tool", tracing.GenAIToolName: "wobbly", tracing.GenAIToolCallID: id,
			tracing.Attempt: int64(n), tracing.WorkerID: "traced-1", tracing.Session: "sess-1", tracing.Tenant: "acme",
		} {
			if v, ok := attr(sp, key); !ok || v.AsInterface() != want {
				t.Errorf("attempt %d: %s = %v (set %v), want %v", n, key, v.AsInterface(), ok, want)
			}
		}
		// The handler's context carries this span, and CallInfo gives its traceparent.
		s.mu.Lock()
		ctxSpan, tp := s.ctx[n], s.tp[n]
		s.mu.Unlock()
		if !ctxSpan.Equal(sp.SpanContext()) {
			t.Errorf("attempt %d: the handler's context holds span %v, want %v", n, ctxSpan.SpanID(), sp.SpanContext().SpanID())
		}
		if want := tracing.Traceparent(sp.SpanContext()); tp != want || tp == callTraceparent {
			t.Errorf("attempt %d: CallInfo.Traceparent = %q, want the span's %q", n, tp, want)
		}
	}
	first, second := got[0], got[1]
	if v, _ := attr(first, tracing.ErrorType); v.AsString() != "transient.http_503" {
		t.Errorf("attempt 1: error.type = %q, want transient.http_503", v.AsString())
	}
	if first.Status().Code != codes.Error {
		t.Errorf("attempt 1: status %v, want Error", first.Status())
	}
	retry, ok := event(first, "retry")
	if !ok {
		t.Fatalf("attempt 1 has no retry event: %v", first.Events())
	}
	if v, ok := eventAttr(retry, tracing.RetryDelay); !ok || v.AsInt64() != 50 {
		t.Errorf("retry event delay_ms = %v (set %v), want 50 (the base delay, jitter centred)", v.AsInt64(), ok)
	}
	if v, _ := attr(first, tracing.Outcome); v.AsString() != "retry" {
		t.Errorf("attempt 1: outcome %q, want retry", v.AsString())
	}
	if _, ok := attr(first, tracing.QueueWait); !ok {
		t.Error("attempt 1 has no queue wait")
	}
	if _, ok := attr(second, tracing.ErrorType); ok || second.Status().Code == codes.Error {
		t.Errorf("attempt 2 succeeded but has error.type or an Error status: %v", second.Status())
	}
	if v, _ := attr(second, tracing.Outcome); v.AsString() != "success" {
		t.Errorf("attempt 2: outcome %q, want success", v.AsString())
	}
	if _, ok := event(second, "retry"); ok {
		t.Error("attempt 2 has a retry event")
	}

	queued := rec.named("queued wobbly")
	if len(queued) != 1 {
		t.Fatalf("%d queued spans, want 1 (the first delivery's)", len(queued))
	}
	q := queued[0]
	if q.Parent().SpanID() != parent.SpanID() || q.SpanContext().TraceID() != parent.TraceID() {
		t.Errorf("queued span's parent %v, want the call's %v", q.Parent().SpanID(), parent.SpanID())
	}
	// The publish time is the server's; on one machine it is between the
	// publish call and the delivery, and the queued span ends where the
	// first attempt starts.
	if q.StartTime().Before(published.Add(-time.Second)) || q.EndTime().Before(q.StartTime()) || !q.EndTime().Equal(first.StartTime()) {
		t.Errorf("queued span %v..%v, first attempt starts %v, published %v", q.StartTime(), q.EndTime(), first.StartTime(), published)
	}
}

// A call that fails on every attempt has the dead_letter event on its
// last execute_tool span; a call with invalid input is refused before it
// runs and still gets a span, with error.type validation.<code>; a panic
// is internal.panic.
func TestTraceDeadLetterValidationPanic(t *testing.T) {
	t.Parallel()
	broken := tool("broken", func(context.Context, json.RawMessage) (tools.Output, error) {
		return tools.Output{}, classify.Transient(fmt.Errorf("down"))
	})
	broken.Retry.MaxAttempts = 2
	strict := tool("strict", func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ran"), nil })
	strict.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	panicky := tool("panicky", func(context.Context, json.RawMessage) (tools.Output, error) { panic("boom") })
	b := setup(t, broken, strict, panicky)
	tracer, rec := newSpans(t)
	b.start(t, func(c *worker.Config) { c.Tracer = tracer })

	id := b.publish(t, "broken", `{}`, withTraceparent(callTraceparent))
	if r := b.results.await(t, id); !r.IsError || r.Attempts != 2 {
		t.Fatalf("result %+v; want an error after 2 attempts", r)
	}
	got := rec.await(t, "execute_tool broken", 2)
	last := got[len(got)-1]
	if v, _ := attr(last, tracing.Attempt); v.AsInt64() != 2 {
		t.Fatalf("the last span ended is attempt %d", v.AsInt64())
	}
	dl, ok := event(last, "dead_letter")
	if !ok {
		t.Fatalf("the last attempt has no dead_letter event: %v", last.Events())
	}
	if v, _ := eventAttr(dl, "toolpool.dlq.reason"); v.AsString() != "exhausted" {
		t.Errorf("dead_letter reason %q, want exhausted", v.AsString())
	}
	if v, _ := attr(last, tracing.ErrorType); v.AsString() != "transient.transient" {
		t.Errorf("error.type %q", v.AsString())
	}
	if _, ok := event(got[0], "dead_letter"); ok {
		t.Error("attempt 1 has a dead_letter event")
	}

	id = b.publish(t, "strict", `{"n":"x"}`, withTraceparent(callTraceparent))
	if r := b.results.await(t, id); !r.IsError || r.Class != envelope.ClassValidation {
		t.Fatalf("result %+v; want a validation error", r)
	}
	sp := rec.await(t, "execute_tool strict", 1)[0]
	if v, _ := attr(sp, tracing.ErrorType); !strings.HasPrefix(v.AsString(), "validation.") || sp.Status().Code != codes.Error {
		t.Errorf("refused call: error.type %q status %v; want validation.<code>, Error", v.AsString(), sp.Status())
	}
	if _, ok := attr(sp, "toolpool.exec_ms"); ok {
		t.Error("a call refused before it ran has an exec time")
	}

	id = b.publish(t, "panicky", `{}`)
	if r := b.results.await(t, id); !r.IsError {
		t.Fatalf("result %+v; want an error", r)
	}
	sp = rec.await(t, "execute_tool panicky", 1)[0]
	if v, _ := attr(sp, tracing.ErrorType); v.AsString() != "internal.panic" {
		t.Errorf("panic: error.type %q, want internal.panic", v.AsString())
	}
	if sp.Parent().IsValid() {
		t.Errorf("a call without a traceparent has a parent: %v", sp.Parent())
	}
}

// The http_request tool sends the execute_tool span's traceparent, not
// the call's, to the server it calls; with tracing off it sends the
// call's, and no span is made.
func TestTraceHTTPRequestSendsSpanTraceparent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("traceparent"))
		mu.Unlock()
		_, _ = w.Write([]byte("pong"))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	httpTool, closer, err := builtin.NewHTTPRequest(builtin.HTTPConfig{Guard: &netguard.Guard{AllowHosts: []string{u.Host}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	b := setup(t, httpTool)
	input := `{"method":"GET","url":"` + srv.URL + `/ping"}`

	tracer, rec := newSpans(t)
	on := b.start(t, func(c *worker.Config) { c.Tracer = tracer })
	id := b.publish(t, "http_request", input, withTraceparent(callTraceparent))
	if r := b.results.await(t, id); r.IsError {
		t.Fatalf("result %+v", r)
	}
	sp := rec.await(t, "execute_tool http_request", 1)[0]
	mu.Lock()
	got := slices.Clone(sent)
	mu.Unlock()
	if want := tracing.Traceparent(sp.SpanContext()); len(got) != 1 || got[0] != want {
		t.Errorf("traceparent sent %q, want the span's %q", got, want)
	}

	// Tracing off: the call's own traceparent goes on, and nothing is recorded.
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := on.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	before := len(rec.rec.Ended())
	b.start(t)
	id = b.publish(t, "http_request", input, withTraceparent(callTraceparent))
	if r := b.results.await(t, id); r.IsError {
		t.Fatalf("result %+v", r)
	}
	mu.Lock()
	got = slices.Clone(sent)
	mu.Unlock()
	if len(got) != 2 || got[1] != callTraceparent {
		t.Errorf("tracing off: traceparent sent %q, want the call's %q", got, callTraceparent)
	}
	if n := len(rec.rec.Ended()); n != before {
		t.Errorf("tracing off: %d spans recorded", n-before)
	}
}

// An unsampled call (its traceparent's flags 00) records nothing, and its
// tools still send a traceparent of the trace on.
func TestTraceUnsampledRecordsNothing(t *testing.T) {
	t.Parallel()
	s := newSeen()
	echo := tool("echo", func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
		s.record(ctx)
		return tools.Text("hi"), nil
	})
	b := setup(t, echo)
	tracer, rec := newSpans(t)
	b.start(t, func(c *worker.Config) { c.Tracer = tracer })
	const unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	if r := b.results.await(t, b.publish(t, "echo", `{}`, withTraceparent(unsampled))); r.IsError {
		t.Fatalf("result %+v", r)
	}
	if n := len(rec.rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded for an unsampled call", n)
	}
	s.mu.Lock()
	tp := s.tp[1]
	s.mu.Unlock()
	sc, ok := tracing.ParseTraceparent(tp)
	if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.IsSampled() {
		t.Errorf("CallInfo.Traceparent = %q; want an unsampled one of the call's trace", tp)
	}
}
