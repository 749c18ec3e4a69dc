package dlq_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// tracedDeadLetter stores a dead letter whose call ran under traceparent.
func tracedDeadLetter(t *testing.T, b *bundle, tool, id, traceparent string) uint64 {
	t.Helper()
	now := time.Now()
	data, err := envelope.EncodeCall(&envelope.Call{V: envelope.Version, ID: id, Tool: tool, Input: json.RawMessage(`{}`),
		CreatedAt: now, Deadline: now.Add(time.Minute), Traceparent: traceparent})
	if err != nil {
		t.Fatal(err)
	}
	e := settle.NewEntry(classify.FateExhausted, tool, id, data)
	m, err := e.Msg(jetstream.DLQSubject(tool), id)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := b.js.PublishMsg(ctxFor(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// TestReplayTraced: with a tracer, a replay is a span "replay <tool>"
// linked to the dead letter's trace, and the replayed call runs under it.
func TestReplayTraced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	const original = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	id := newID()
	seq := tracedDeadLetter(t, b, "echo", id, original)
	n, err := s.Replay(ctxFor(t), []uint64{seq}, dlq.ReplayConfig{Tracer: tracing.NewTracer(tp)}, nil)
	if err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	if sp.Name() != "replay echo" || sp.SpanKind() != trace.SpanKindProducer {
		t.Errorf("span %q kind %v", sp.Name(), sp.SpanKind())
	}
	want, _ := tracing.ParseTraceparent(original)
	if links := sp.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != want.TraceID() || links[0].SpanContext.SpanID() != want.SpanID() {
		t.Errorf("links = %+v; want one to the dead letter's traceparent", links)
	}
	if sp.SpanContext().TraceID() == want.TraceID() {
		t.Error("the replay is in the dead letter's trace; want a trace of its own, linked")
	}
	call := callsOn(t, b.js, "echo")[dlq.ReplayID(id, seq)]
	if call == nil {
		t.Fatal("the replayed call is not queued")
	}
	if got := tracing.Traceparent(sp.SpanContext()); call.Traceparent != got {
		t.Errorf("replayed call's traceparent = %q, want the replay span's %q", call.Traceparent, got)
	}
}

// TestReplayUntraced: without a tracer the replayed call keeps the dead
// letter's traceparent.
func TestReplayUntraced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newStore(t, b)
	const original = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	id := newID()
	seq := tracedDeadLetter(t, b, "echo", id, original)
	if n, err := s.Replay(ctxFor(t), []uint64{seq}, dlq.ReplayConfig{}, nil); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	if call := callsOn(t, b.js, "echo")[dlq.ReplayID(id, seq)]; call == nil || call.Traceparent != original {
		t.Fatalf("replayed call = %+v; want the dead letter's traceparent", call)
	}
}
