package dispatch

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// startEchoWorker is a fast echo-like worker for benchmarks: it answers
// every call with its input as text, publishing the result asynchronously
// (Nats-Msg-Id = call id) before acking the call.
func startEchoWorker(b *testing.B, tb *testBundle, tool string) {
	nc := natstest.Connect(b, tb.srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := j.CreateOrUpdateConsumer(context.Background(), jetstream.StreamCalls, js.ConsumerConfig{
		Durable:       jetstream.ConsumerName(tool),
		FilterSubject: jetstream.CallSubject(tool),
		AckPolicy:     js.AckExplicitPolicy,
		MaxAckPending: 10_000,
	})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := cons.Consume(func(m js.Msg) {
		c, err := envelope.DecodeCall(m.Data(), envelope.DefaultLimits)
		if err != nil {
			_ = m.Term()
			return
		}
		data, err := envelope.EncodeResult(&envelope.Result{CallID: c.ID, Key: c.Key, Tool: c.Tool, Content: envelope.Text(string(c.Input))})
		if err != nil {
			_ = m.Term()
			return
		}
		_, _ = j.PublishMsgAsync(&nats.Msg{
			Subject: jetstream.ResultSubject(c.ReplyTo, c.Key),
			Data:    data,
			Header:  nats.Header{js.MsgIDHeader: []string{jetstream.ResultMsgID(c.ReplyTo, c.Key)}},
		})
		_ = m.Ack()
	}, js.PullMaxMessages(512))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cc.Stop()
		<-cc.Closed()
	})
}

// BenchmarkDispatchRoundTrip measures Dispatch of one call through a real
// embedded JetStream server (same process) and an echo worker: publish,
// PubAck, worker, result, delivery to the caller.
func BenchmarkDispatchRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name     string
		parallel int // goroutines per GOMAXPROCS; 0: one caller
		calls    int // calls per turn
	}{
		{"serial", 0, 1},
		{"serial-turn-of-4", 0, 4},
		{"parallel-64", 32, 1},
		{"parallel-256", 128, 1},
	} {
		for _, fm := range fairModes {
			b.Run(bc.name+"/"+fm.name, func(b *testing.B) {
				tb := setup(b, fm.mod)
				startEchoWorker(b, tb, "echo")
				var n atomic.Int64
				turn := func() []envelope.ToolUseBlock {
					calls := make([]envelope.ToolUseBlock, bc.calls)
					for i := range calls {
						calls[i] = envelope.ToolUseBlock{
							Type: "tool_use", ID: "toolu_" + strconv.FormatInt(n.Add(1), 10),
							Name: "echo", Input: []byte(`{"text":"hello"}`),
						}
					}
					return calls
				}
				run := func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					res, err := tb.d.Dispatch(ctx, "bench", turn())
					if err != nil {
						b.Error(err)
						return
					}
					if res[0].IsError {
						b.Errorf("is_error: %s", res[0].Content.Text())
					}
				}
				runBench(b, bc.parallel, &n, run)
			})
		}
	}
}

// fairModes are the dispatcher's fair-share settings the benchmarks
// compare: off; on, for a tool of unknown slots (no window: every call is
// granted at once); on, with a window of 256 slots (plus the margin),
// which the parallel cases fill.
var fairModes = []struct {
	name string
	mod  func(*Config)
}{
	{"nofair", func(c *Config) { c.NoFairness = true }},
	{"fair", func(*Config) {}},
	{"fair-window", func(c *Config) { c.Catalog = fairCatalog{"echo": {Slots: 256}} }},
}

// BenchmarkRawRoundTrip is the baseline for BenchmarkDispatchRoundTrip,
// measured in the same run: the same path with the least code around it (a
// sync.Map of channels, no validation, deadlines, dedup cache or session
// tracking).
func BenchmarkRawRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name     string
		parallel int
	}{
		{"serial", 0},
		{"parallel-64", 32},
		{"parallel-256", 128},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tb := setup(b)
			startEchoWorker(b, tb, "echo")
			const instance = "raw"
			var waiting sync.Map // call id → chan *envelope.Result
			cons, err := tb.js.OrderedConsumer(context.Background(), jetstream.StreamResults, js.OrderedConsumerConfig{
				FilterSubjects: []string{jetstream.ResultFilter(instance)},
				DeliverPolicy:  js.DeliverNewPolicy,
			})
			if err != nil {
				b.Fatal(err)
			}
			cc, err := cons.Consume(func(m js.Msg) {
				r, err := envelope.DecodeResult(m.Data())
				if err != nil {
					return
				}
				if ch, ok := waiting.LoadAndDelete(r.CallID); ok {
					ch.(chan *envelope.Result) <- r
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				cc.Stop()
				<-cc.Closed()
			})
			var n atomic.Int64
			run := func() {
				id := "toolu_" + strconv.FormatInt(n.Add(1), 10)
				now := time.Now()
				data, err := envelope.EncodeCall(&envelope.Call{
					ID: id, Tool: "echo", Input: []byte(`{"text":"hello"}`), ReplyTo: instance,
					CreatedAt: now, Deadline: now.Add(30 * time.Second),
				})
				if err != nil {
					b.Error(err)
					return
				}
				ch := make(chan *envelope.Result, 1)
				waiting.Store(id, ch)
				paf, err := tb.js.PublishMsgAsync(&nats.Msg{
					Subject: jetstream.CallSubject("echo"), Data: data,
					Header: nats.Header{js.MsgIDHeader: []string{id}},
				})
				if err != nil {
					b.Error(err)
					return
				}
				select {
				case <-paf.Ok():
				case err := <-paf.Err():
					b.Error(err)
					return
				}
				select {
				case <-ch:
				case <-time.After(30 * time.Second):
					b.Error("no result")
				}
			}
			runBench(b, bc.parallel, &n, run)
		})
	}
}

// runBench runs run b.N times, from parallel goroutines per GOMAXPROCS
// (0: one caller), and reports the calls per second n counted.
func runBench(b *testing.B, parallel int, n *atomic.Int64, run func()) {
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if parallel == 0 {
		for b.Loop() {
			run()
		}
	} else {
		b.SetParallelism(parallel)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				run()
			}
		})
	}
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "calls/s")
}
