package worker_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// blockingTool is a tool whose calls run until release is closed.
func blockingTool(name string, started *atomic.Int32, release <-chan struct{}) tools.Tool {
	t := tool(name, func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
		started.Add(1)
		select {
		case <-release:
			return tools.Text("released"), nil
		case <-ctx.Done():
			return tools.Output{}, ctx.Err()
		}
	})
	t.Timeout = time.Minute
	return t
}

// A worker whose slots are all busy with one tool pulls no more calls of
// another: they stay in the stream for other workers. Only the calls its
// pull asked for before the slots filled up wait for a slot, and those are
// kept alive: they run once, as attempt 1, even after waiting longer than
// their ack wait.
func TestPullsOnlyForFreeSlots(t *testing.T) {
	t.Parallel()
	var started atomic.Int32
	release := make(chan struct{})
	b := setup(t, blockingTool("slow", &started, release), textTool("fast", "done"))
	const slots = 2
	// A short liveness window, so the wait below outlasts it several times:
	// the heartbeats (every AckWait/4) keep both the running slow calls and
	// the queued fast ones.
	const ackWait = 2 * time.Second
	rec := newRecorder()
	b.start(t, func(c *worker.Config) {
		c.WorkerID = "busy"
		c.Concurrency = slots
		c.Metrics = rec
		c.AckWait = ackWait
	})

	var slow []string
	for range slots {
		slow = append(slow, b.publish(t, "slow", `{}`))
	}
	natstest.Eventually(t, waitLong, "both slow calls run", func() bool { return started.Load() == slots })

	const fast = 5
	var ids []string
	for range fast {
		ids = append(ids, b.publish(t, "fast", `{}`))
	}
	// The busy worker's pull for fast, made while its slots were free, may
	// take up to that many calls; nothing pulls after that.
	time.Sleep(500 * time.Millisecond)
	info := natstest.CallConsumerInfo(t, b.js, "fast")
	ackPending, pending := info.NumAckPending, int(info.NumPending)
	if ackPending > slots || pending < fast-slots {
		t.Fatalf("fast: %d calls pulled and %d left in the stream while every slot was busy; want at most %d pulled",
			ackPending, pending, slots)
	}
	// What the busy worker pulled waits for a slot, and says so.
	natstest.Eventually(t, waitLong, "the pulled calls counted as queued", func() bool {
		return rec.queuedNow("fast") == ackPending
	})

	// Another worker takes what the busy one left, while its slots stay busy.
	b.start(t, func(c *worker.Config) { c.WorkerID = "free"; c.Tools = []string{"fast"}; c.AckWait = ackWait })
	natstest.Eventually(t, waitLong, "the free worker runs the calls left in the stream", func() bool {
		done := 0
		for _, id := range ids {
			done += min(b.results.count(id), 1)
		}
		return done >= fast-ackPending
	})
	for _, id := range ids {
		if b.results.count(id) > 0 {
			if r := b.results.await(t, id); r.WorkerID != "free" {
				t.Errorf("fast call %s ran on %q while that worker's slots were all busy", id, r.WorkerID)
			}
		}
	}

	// Hold the slots for several ack waits: neither the slow calls running
	// nor the fast ones the busy worker queued may be delivered again.
	time.Sleep(3 * ackWait)
	close(release)
	for _, id := range slow {
		if r := b.results.await(t, id); r.IsError {
			t.Errorf("slow call %s: %s", id, r.Content.Text())
		}
	}
	for _, id := range ids {
		r := b.results.await(t, id)
		if r.IsError || r.Attempts != 1 || b.results.count(id) != 1 {
			t.Errorf("fast call %s: attempts %d, %d results, error %v (by %s); want one result of attempt 1",
				id, r.Attempts, b.results.count(id), r.IsError, r.WorkerID)
		}
	}
	if n := rec.queuedNow("fast"); n != 0 {
		t.Errorf("%d fast calls still counted as queued after all ran", n)
	}
}

// A worker whose consumer is deleted under it (an operator's mistake)
// makes it again and goes on serving.
func TestConsumerMadeAgainAfterDeletion(t *testing.T) {
	t.Parallel()
	b := setup(t, textTool("echo", "hi"))
	b.start(t)
	if r := b.results.await(t, b.publish(t, "echo", `{}`)); r.IsError {
		t.Fatalf("before: %s", r.Content.Text())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.js.DeleteConsumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName("echo")); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitLong, "the consumer made again", func() bool {
		_, err := b.js.Consumer(ctx, jetstream.StreamCalls, jetstream.ConsumerName("echo"))
		return err == nil
	})
	if r := b.results.await(t, b.publish(t, "echo", `{}`)); r.IsError || r.Content.Text() != "hi" {
		t.Fatalf("after: %+v", r)
	}
}
