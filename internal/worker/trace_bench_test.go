package worker

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// discardExporter exports spans into the void.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkProcessTraced is BenchmarkProcess with tracing on at 100 %
// sampling, the spans batched as the binaries do (into the void): the
// cost of a sampled call's spans on the worker. Compare with
// BenchmarkProcess's cases of the same name.
//
//	go test -run '^$' -bench 'Process(Traced)?/(echo|flaky-503)' -benchmem ./internal/worker/
func BenchmarkProcessTraced(b *testing.B) {
	for _, bc := range []struct {
		name  string
		tool  tools.Tool
		input string
	}{
		{"echo-256B", demo.Echo(), `{"text":"` + strings.Repeat("x", 256-len(`{"text":""}`)) + `"}`},
		{"flaky-503-retry", demo.Flaky(), `{"fail":"503","times":1}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			reg := tools.NewRegistry()
			if err := reg.Register(bc.tool); err != nil {
				b.Fatal(err)
			}
			metrics := &countingMetrics{}
			w, err := New(Config{
				JetStream: nopJS{}, Registry: reg, WorkerID: "bench-worker-1",
				Logger:  slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
				Metrics: metrics, Tracer: tracing.NewTracer(tp),
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(w.pool.close)
			rt, _ := reg.Lookup(bc.tool.Name)
			s := &served{tool: rt, heartbeat: 10 * time.Second}
			now := time.Now()
			data, err := envelope.EncodeCall(&envelope.Call{
				ID: "toolu_01A09q90qw90lq917835lq9", Tool: bc.tool.Name, Input: []byte(bc.input),
				Session: "bench-session", ReplyTo: "bench-orchestrator", CreatedAt: now, Deadline: now.Add(time.Hour),
				Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			})
			if err != nil {
				b.Fatal(err)
			}
			msg := &benchMsg{data: data, meta: js.MsgMetadata{
				Sequence: js.SequencePair{Stream: 1, Consumer: 1}, NumDelivered: 1,
				Stream: "TOOL_CALLS", Consumer: "tool_" + bc.tool.Name, Timestamp: now,
			}}
			j := &job{msg: msg, served: s}
			w.process(j)
			if metrics.n != 1 {
				b.Fatalf("%d events after one call", metrics.n)
			}
			b.ReportAllocs()
			for b.Loop() {
				*j = job{msg: msg, served: s}
				w.process(j)
			}
		})
	}
}
