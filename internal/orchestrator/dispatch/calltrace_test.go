package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// newRecorder is a tracer whose ended spans the recorder keeps.
func newRecorder(t testing.TB) (*tracing.Tracer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.NewTracer(tp), rec
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func eventOf(s sdktrace.ReadOnlySpan, name string) (sdktrace.Event, bool) {
	for _, e := range s.Events() {
		if e.Name == name {
			return e, true
		}
	}
	return sdktrace.Event{}, false
}

func eventAttr(e sdktrace.Event, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range e.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(spans))
	return nil
}

func TestCallSpans(t *testing.T) {
	t.Parallel()
	tr, rec := newRecorder(t)
	b := setup(t, func(c *Config) { c.Tracer = tr; c.Instance = "orch-trace" })
	echo := startWorker(t, b, "echo", echoText)
	fail := startWorker(t, b, "fail", alwaysFail)

	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := WithTenant(WithTraceparent(timeout(t, 10*time.Second), incoming), "acme")
	res, err := b.d.Dispatch(ctx, "sess-1", []envelope.ToolUseBlock{
		use("toolu_1", "echo", `{"text":"hi"}`), use("toolu_2", "fail", `{}`), use("toolu_3", "nope", `{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].IsError || !res[1].IsError || !res[2].IsError {
		t.Fatalf("results: %+v", res)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3", len(spans))
	}
	want, _ := tracing.ParseTraceparent(incoming)
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindProducer {
			t.Errorf("%s: kind %v", s.Name(), s.SpanKind())
		}
		if s.Parent().SpanID() != want.SpanID() || s.SpanContext().TraceID() != want.TraceID() {
			t.Errorf("%s: parent %v, trace %v; want the incoming traceparent's", s.Name(), s.Parent(), s.SpanContext().TraceID())
		}
		for k, v := range map[attribute.Key]string{tracing.Session: "sess-1", tracing.Tenant: "acme", tracing.Instance: "orch-trace"} {
			if got, _ := attrOf(s, k); got.AsString() != v {
				t.Errorf("%s: %s = %q, want %q", s.Name(), k, got.AsString(), v)
			}
		}
	}

	ok := spanNamed(t, spans, "call echo")
	if v, _ := attrOf(ok, tracing.GenAIToolName); v.AsString() != "echo" {
		t.Errorf("gen_ai.tool.name = %q", v.AsString())
	}
	if v, _ := attrOf(ok, tracing.GenAIToolCallID); v.AsString() != "toolu_1" {
		t.Errorf("gen_ai.tool.call.id = %q", v.AsString())
	}
	if v, _ := attrOf(ok, tracing.CallKey); v.AsString() != res[0].Key {
		t.Errorf("toolpool.call.key = %q, want %q", v.AsString(), res[0].Key)
	}
	if ok.Status().Code == codes.Error {
		t.Errorf("a success has status %v", ok.Status())
	}
	if e, found := eventOf(ok, eventPublished); !found {
		t.Error("no published event")
	} else if v, _ := eventAttr(e, attrStreamSeq); v.AsString() == "" || v.AsString() == "0" {
		t.Errorf("published seq = %q", v.AsString())
	}
	if e, found := eventOf(ok, eventResult); !found {
		t.Error("no result event")
	} else if v, _ := eventAttr(e, tracing.Outcome); v.AsString() != "success" {
		t.Errorf("result outcome = %q", v.AsString())
	}

	bad := spanNamed(t, spans, "call fail")
	if v, _ := attrOf(bad, tracing.ErrorType); v.AsString() != "permanent.permanent" {
		t.Errorf("error.type = %q, want permanent.permanent", v.AsString())
	}
	if bad.Status().Code != codes.Error {
		t.Errorf("a failure has status %v", bad.Status())
	}
	if e, _ := eventOf(bad, eventResult); e.Name == "" {
		t.Error("no result event on the failure")
	} else if v, _ := eventAttr(e, attrAttempts); v.AsInt64() != 1 {
		t.Errorf("attempts = %d", v.AsInt64())
	}
	unknown := spanNamed(t, spans, "call nope")
	if v, _ := attrOf(unknown, tracing.ErrorType); v.AsString() != "validation.unknown_tool" {
		t.Errorf("unknown tool: error.type = %q", v.AsString())
	}
	if _, found := eventOf(unknown, eventPublished); found {
		t.Error("an unknown tool's call was published")
	}

	// Each call's envelope and message carry its own span's context.
	for _, w := range []struct {
		fw   *fakeWorker
		span sdktrace.ReadOnlySpan
	}{{echo, ok}, {fail, bad}} {
		calls, hdrs := w.fw.seen()
		if len(calls) != 1 {
			t.Fatalf("%s: worker saw %d calls", w.span.Name(), len(calls))
		}
		tp := tracing.Traceparent(w.span.SpanContext())
		if calls[0].Traceparent != tp || hdrs[0].Get(envelope.HeaderTraceparent) != tp {
			t.Errorf("%s: envelope %q, header %q; want the span's %q", w.span.Name(), calls[0].Traceparent, hdrs[0].Get(envelope.HeaderTraceparent), tp)
		}
	}
}

func TestCallSpansAdopted(t *testing.T) {
	t.Parallel()
	tr, rec := newRecorder(t)
	b := setup(t, func(c *Config) { c.Tracer = tr })
	echo := startWorker(t, b, "echo", echoText)

	span := StartCallSpan(context.Background(), tr, "echo", "toolu_a", "")
	ctx := WithCallSpans(timeout(t, 10*time.Second), []trace.Span{span})
	if _, err := b.d.Dispatch(ctx, "", []envelope.ToolUseBlock{use("toolu_a", "echo", `{"text":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("the dispatcher ended %d spans of its caller's", n)
	}
	calls, _ := echo.seen()
	if len(calls) != 1 || calls[0].Traceparent != tracing.Traceparent(span.SpanContext()) {
		t.Fatalf("the call did not carry its caller's span: %+v", calls)
	}
	EndCallSpan(span, &envelope.Result{IsError: true, Class: envelope.ClassTransient, Code: "timeout"})
	got := rec.Ended()
	if len(got) != 1 {
		t.Fatalf("%d spans", len(got))
	}
	if _, found := eventOf(got[0], eventPublished); !found {
		t.Error("the dispatcher added no published event to its caller's span")
	}
	if v, _ := attrOf(got[0], tracing.ErrorType); v.AsString() != "transient.timeout" {
		t.Errorf("error.type = %q", v.AsString())
	}
}

func TestCallSpansOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	echo := startWorker(t, b, "echo", echoText)
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := WithTraceparent(timeout(t, 10*time.Second), incoming)
	if _, err := b.d.Dispatch(ctx, "", []envelope.ToolUseBlock{use("toolu_off", "echo", `{"text":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	calls, hdrs := echo.seen()
	if len(calls) != 1 || calls[0].Traceparent != incoming || hdrs[0].Get(envelope.HeaderTraceparent) != incoming {
		t.Fatalf("with tracing off the call must carry the incoming traceparent: %+v", calls)
	}
}

// TestCallSpanOfAnInvalidToolName: a caller's unchecked tool name goes
// into no span.
func TestCallSpanOfAnInvalidToolName(t *testing.T) {
	t.Parallel()
	tr, rec := newRecorder(t)
	b := setup(t, func(c *Config) { c.Tracer = tr })
	long := strings.Repeat("x", 10_000)
	res, err := b.d.Dispatch(timeout(t, 10*time.Second), "", []envelope.ToolUseBlock{use("toolu_bad", long, `{}`), use("toolu_sp", "a b", `{}`)})
	if err != nil || !res[0].IsError || !res[1].IsError {
		t.Fatalf("%+v, %v", res, err)
	}
	for _, s := range rec.Ended() {
		if v, _ := attrOf(s, tracing.GenAIToolName); s.Name() != "call _invalid" || v.AsString() != "_invalid" {
			t.Errorf("span %.40q, gen_ai.tool.name %.40q; want call _invalid", s.Name(), v.AsString())
		}
	}
	if n := len(rec.Ended()); n != 2 {
		t.Errorf("%d spans, want 2", n)
	}
}
