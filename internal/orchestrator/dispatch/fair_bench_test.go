package dispatch

import (
	"context"
	"fmt"
	"slices"
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

// startSleepWorker is a worker of tool with slots slots whose calls take
// d: at most slots unacknowledged at once (MaxAckPending), each answered
// after d and then acked.
func startSleepWorker(b *testing.B, tb *testBundle, tool string, slots int, d time.Duration) {
	nc := natstest.Connect(b, tb.srv.ClientURL())
	j, err := js.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := j.CreateOrUpdateConsumer(context.Background(), jetstream.StreamCalls, js.ConsumerConfig{
		Durable: jetstream.ConsumerName(tool), FilterSubject: jetstream.CallSubject(tool),
		AckPolicy: js.AckExplicitPolicy, MaxAckPending: slots,
	})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	cc, err := cons.Consume(func(m js.Msg) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := envelope.DecodeCall(m.Data(), envelope.DefaultLimits)
			if err != nil {
				_ = m.Term()
				return
			}
			time.Sleep(d)
			data, _ := envelope.EncodeResult(&envelope.Result{CallID: c.ID, Key: c.Key, Tool: c.Tool, Content: envelope.Text("slept")})
			_, _ = j.PublishMsg(context.Background(), &nats.Msg{
				Subject: jetstream.ResultSubject(c.ReplyTo, c.Key), Data: data,
				Header: nats.Header{js.MsgIDHeader: []string{jetstream.ResultMsgID(c.ReplyTo, c.Key)}},
			})
			_ = m.Ack()
		}()
	}, js.PullMaxMessages(slots))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cc.Stop()
		<-cc.Closed()
		wg.Wait()
	})
}

// BenchmarkNoisyNeighbour is issue 15's scenario at the dispatcher: a tool
// of 20 ms calls and 64 slots; tenant A posts a backlog at once, tenant B
// one call every 100 ms. It reports A's throughput and B's p99 latency,
// fairness off and on (one iteration is the whole scenario).
//
//	go test -run '^$' -bench NoisyNeighbour -benchtime 1x ./internal/orchestrator/dispatch/
func BenchmarkNoisyNeighbour(b *testing.B) {
	const slots, run, backlog = 64, 20 * time.Millisecond, 3000
	for _, fair := range []bool{false, true} {
		b.Run(map[bool]string{false: "nofair", true: "fair"}[fair], func(b *testing.B) {
			tb := setup(b, func(c *Config) {
				c.NoFairness = !fair
				c.Catalog = fairCatalog{"sleep": {Slots: slots}}
				c.MaxQueueDepth, c.MaxCallsInFlight, c.NoQueueWaitAdmission = -1, -1, true
			})
			startSleepWorker(b, tb, "sleep", slots, run)
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				var n atomic.Int64
				var wg sync.WaitGroup
				start := time.Now()
				var aDone time.Duration
				var aMu sync.Mutex
				for i := range backlog {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, err := tb.d.Dispatch(WithTenant(ctx, "A"), "", []envelope.ToolUseBlock{use(fmt.Sprintf("a_%d_%d", n.Add(1), i), "sleep", `{}`)})
						if err != nil {
							b.Error(err)
						}
						aMu.Lock()
						aDone = max(aDone, time.Since(start))
						aMu.Unlock()
					}()
				}
				var lat []time.Duration
				tick := time.NewTicker(100 * time.Millisecond)
				stopB := make(chan struct{})
				bDone := make(chan struct{})
				go func() {
					defer close(bDone)
					for k := 0; ; k++ {
						select {
						case <-stopB:
							return
						case <-tick.C:
						}
						t0 := time.Now()
						if _, err := tb.d.Dispatch(WithTenant(ctx, "B"), "", []envelope.ToolUseBlock{use(fmt.Sprintf("b_%d_%d", n.Add(1), k), "sleep", `{}`)}); err != nil {
							b.Error(err)
						}
						lat = append(lat, time.Since(t0))
					}
				}()
				wg.Wait()
				close(stopB)
				<-bDone
				tick.Stop()
				cancel()
				slices.Sort(lat)
				if len(lat) > 0 {
					b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "B-p99-ms")
					b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "B-p50-ms")
				}
				b.ReportMetric(float64(backlog)/aDone.Seconds(), "A-calls/s")
			}
		})
	}
}
