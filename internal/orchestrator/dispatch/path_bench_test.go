package dispatch

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// The dispatcher's own cost per call, without a server: publishing a call
// hands it to an echo "worker" that answers through handleResult at once.
// What remains is prepare (catalog, encode, register), the publish and
// PubAck bookkeeping, delivery through the call table, and collection.
// The network path is measured end to end by "orchestrator bench".
//
//	go test -run '^$' -bench DispatchPath -benchmem ./internal/orchestrator/dispatch/

// loopbackJS answers every published call with a result, synchronously.
type loopbackJS struct {
	js.JetStream
	d *Dispatcher
}

var loopbackAck = &js.PubAck{Stream: "TOOL_CALLS", Sequence: 1}

// Conn is nil: there is no connection (nor a last error on it).
func (l *loopbackJS) Conn() *nats.Conn { return nil }

// loopbackFuture is acknowledged already, as nats.go's future is once the
// PubAck is in (a channel per future, as there).
type loopbackFuture struct {
	m  *nats.Msg
	ok chan *js.PubAck
}

func (f loopbackFuture) Ok() <-chan *js.PubAck { return f.ok }
func (loopbackFuture) Err() <-chan error       { return nil }
func (f loopbackFuture) Msg() *nats.Msg        { return f.m }

func (l *loopbackJS) PublishMsgAsync(m *nats.Msg, _ ...js.PublishOpt) (js.PubAckFuture, error) {
	c, err := envelope.DecodeCall(m.Data, envelope.DefaultLimits)
	if err != nil {
		return nil, err
	}
	data, err := envelope.EncodeResult(&envelope.Result{
		CallID: c.ID, Key: c.Key, Tool: c.Tool, Content: envelope.Text(string(c.Input)), Attempts: 1, WorkerID: "w-1",
	})
	if err != nil {
		return nil, err
	}
	l.d.handleResult(&resultMsg{subject: jetstream.ResultSubject(c.ReplyTo, c.Key), data: data})
	f := loopbackFuture{m: m, ok: make(chan *js.PubAck, 1)}
	f.ok <- loopbackAck
	return f, nil
}

// resultMsg is a result message as the ordered consumer delivers it.
type resultMsg struct {
	js.Msg
	subject string
	data    []byte
}

func (m *resultMsg) Data() []byte    { return m.data }
func (m *resultMsg) Subject() string { return m.subject }

func BenchmarkDispatchPath(b *testing.B) {
	for _, k := range []int{1, 4} {
		for _, fm := range fairModes {
			b.Run("turn-of-"+strconv.Itoa(k)+"/"+fm.name, func(b *testing.B) { benchDispatchPath(b, k, fm.mod) })
		}
	}
}

// BenchmarkDispatchPathTraced is BenchmarkDispatchPath's fair mode with
// tracing on, every call sampled: a span per call with its events,
// handed to a batching processor whose exporter drops them (the cost
// the orchestrator pays, without a collector's network).
//
//	go test -run '^$' -bench 'DispatchPath(Traced)?$' -benchmem ./internal/orchestrator/dispatch/
func BenchmarkDispatchPathTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tracing.NewTracer(tp)
	for _, k := range []int{1, 4} {
		b.Run("turn-of-"+strconv.Itoa(k)+"/fair", func(b *testing.B) {
			benchDispatchPath(b, k, func(c *Config) { c.Tracer = tr })
		})
	}
}

func benchDispatchPath(b *testing.B, k int, mod func(*Config)) {
	input := []byte(`{"text":"` + strings.Repeat("x", 256-len(`{"text":""}`)) + `"}`)
	lj := &loopbackJS{}
	cfg := Config{JS: lj, Instance: "bench", Catalog: discovery.StaticCatalog("echo"), MaxQueueDepth: -1, NoQueueWaitAdmission: true,
		ResultCheckInterval: -1} // no result consumer to watch
	mod(&cfg)
	d, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	lj.d = d
	startLocal(b, d) // Start would create the result consumer
	n := 0
	calls := make([]envelope.ToolUseBlock, k)
	ctx := context.Background()
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		for i := range calls {
			n++
			calls[i] = envelope.ToolUseBlock{Type: "tool_use", ID: "toolu_" + strconv.Itoa(n), Name: "echo", Input: input}
		}
		res, err := d.Dispatch(ctx, "bench-session", calls)
		if err != nil {
			b.Fatal(err)
		}
		if res[0].IsError {
			b.Fatalf("is_error: %s", res[0].Content.Text())
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "calls/s")
}
