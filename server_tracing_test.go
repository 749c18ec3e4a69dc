package toolpool_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/tools"
)

// A Server given a TracerProvider records one execute_tool span per
// attempt, a child of the traceparent the call carries, and its tool's
// handler runs under that span (its context and CallInfo.Traceparent).
func TestServerTracerProvider(t *testing.T) {
	t.Parallel()
	const callerTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, nc, _ := natstest.StartProvisioned(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	seen := make(chan [2]string, 1)
	reg := toolpool.NewRegistry()
	reg.MustRegister(toolpool.Tool{
		Name: "peek", Description: "Tells its trace context.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, _ json.RawMessage) (toolpool.Output, error) {
			ci, _ := tools.CallInfoFrom(ctx)
			seen <- [2]string{ci.Traceparent, trace.SpanContextFromContext(ctx).SpanID().String()}
			return toolpool.Text("ok"), nil
		},
	})
	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: nc, Registry: reg, NoHistory: true, TracerProvider: tp, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: nc, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orch.Stop(context.Background()) })

	ctx, cancel := context.WithTimeout(toolpool.WithTraceparent(context.Background(), callerTP), time.Minute)
	defer cancel()
	res, err := orch.Dispatch(ctx, "s", []toolpool.ToolUse{{ID: "toolu_traced", Name: "peek", Input: json.RawMessage(`{}`)}})
	if err != nil || len(res) != 1 || res[0].IsError {
		t.Fatalf("Dispatch = %+v, %v", res, err)
	}
	got := <-seen
	var span sdktrace.ReadOnlySpan
	natstest.Eventually(t, 30*time.Second, "the execute_tool span", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "execute_tool peek" {
				span = s
				return true
			}
		}
		return false
	})
	sc := span.SpanContext()
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("span in trace %s, want the caller's", sc.TraceID())
	}
	if got[1] != sc.SpanID().String() {
		t.Errorf("the handler's context holds span %s, want %s", got[1], sc.SpanID())
	}
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; got[0] != want {
		t.Errorf("CallInfo.Traceparent = %q, want %q", got[0], want)
	}
}
