package toolpool_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/natstest"
)

// TestOrchestratorTracerProvider: an embedder's TracerProvider gets a
// span per call; the error of a call to an unknown tool is its
// error.type.
func TestOrchestratorTracerProvider(t *testing.T) {
	_, nc, _ := natstest.StartProvisioned(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: nc, TracerProvider: tp, NoPoisonWatcher: true, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orch.Stop(context.Background()) })
	res, err := orch.Dispatch(t.Context(), "", []toolpool.ToolUse{{Type: "tool_use", ID: "toolu_x", Name: "nope", Input: []byte(`{}`)}})
	if err != nil || !res[0].IsError {
		t.Fatalf("%+v, %v", res, err)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "call nope" {
		t.Fatalf("spans %v; want one, call nope", spans)
	}
	found := false
	for _, kv := range spans[0].Attributes() {
		found = found || kv.Key == "error.type" && kv.Value.AsString() == "validation.unknown_tool"
	}
	if !found {
		t.Errorf("attributes %v; want error.type validation.unknown_tool", spans[0].Attributes())
	}
}
