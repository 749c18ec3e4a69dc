package worker

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// The worker's per-message path without a server: process() on a call
// message whose acks and result publishes go nowhere. What it measures is
// the worker's own cost per call (decode, validate, execute, classify,
// fate, encode, metrics hook) and its allocations; the NATS round trips
// are measured end to end by "orchestrator bench".
//
//	go test -run '^$' -bench Process -benchmem ./internal/worker/

// nopJS publishes into the void: every publish is acknowledged at once.
type nopJS struct{ js.JetStream }

var okAck = &js.PubAck{Stream: "TOOL_RESULTS", Sequence: 1}

func (nopJS) PublishMsg(context.Context, *nats.Msg, ...js.PublishOpt) (*js.PubAck, error) {
	return okAck, nil
}

// benchMsg is a delivered call message whose verbs do nothing.
type benchMsg struct {
	data []byte
	meta js.MsgMetadata
}

func (m *benchMsg) Metadata() (*js.MsgMetadata, error) {
	md := m.meta // a copy, as nats.go returns a fresh one per call
	return &md, nil
}
func (m *benchMsg) Data() []byte                     { return m.data }
func (m *benchMsg) Headers() nats.Header             { return nil }
func (m *benchMsg) Subject() string                  { return "tools.call.echo" }
func (m *benchMsg) Reply() string                    { return "" }
func (m *benchMsg) Ack() error                       { return nil }
func (m *benchMsg) DoubleAck(context.Context) error  { return nil }
func (m *benchMsg) Nak() error                       { return nil }
func (m *benchMsg) NakWithDelay(time.Duration) error { return nil }
func (m *benchMsg) InProgress() error                { return nil }
func (m *benchMsg) Term() error                      { return nil }
func (m *benchMsg) TermWithReason(string) error      { return nil }
func (m *benchMsg) String() string                   { return string(m.data) }

// countingMetrics counts the events observed.
type countingMetrics struct{ n int }

func (c *countingMetrics) Observe(Event)        { c.n++ }
func (c *countingMetrics) InFlight(string, int) {}

func BenchmarkProcess(b *testing.B) {
	for _, bc := range []struct {
		name    string
		tool    tools.Tool
		input   string
		outcome classify.Fate
	}{
		// echo with a 256-byte input, as "orchestrator bench" sends.
		{"echo-256B", demo.Echo(), `{"text":"` + strings.Repeat("x", 256-len(`{"text":""}`)) + `"}`, classify.FateSuccess},
		{"invalid-input", demo.Echo(), `{"text":5}`, classify.FateError},
		{"flaky-503-retry", demo.Flaky(), `{"fail":"503","times":1}`, classify.FateRetry},
		{"flaky-404", demo.Flaky(), `{"fail":"404"}`, classify.FateError},
	} {
		b.Run(bc.name, func(b *testing.B) {
			reg := tools.NewRegistry()
			if err := reg.Register(bc.tool); err != nil {
				b.Fatal(err)
			}
			metrics := &countingMetrics{}
			w, err := New(Config{
				JetStream: nopJS{}, Registry: reg, WorkerID: "bench-worker-1",
				// As the binaries log: text at info level (into the void).
				Logger:  slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
				Metrics: metrics,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(w.pool.close) // the handlers' goroutines
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
