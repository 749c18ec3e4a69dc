package dispatch

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// A result consumer that stops delivering without noticing (seen after a
// cluster node died) is replaced by the watchdog: the waiting turn gets its
// result from TOOL_RESULTS, not a timeout.
func TestResultWatchdogReplacesStalledConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ResultCheckInterval = 200 * time.Millisecond })
	startWorker(t, b, "echo", echoText)
	if _, err := b.d.Dispatch(timeout(t, 10*time.Second), "", []envelope.ToolUseBlock{use("before", "echo", `{}`)}); err != nil {
		t.Fatal(err)
	}

	// Stall it behind the dispatcher's back: nats.go will not make it again.
	b.d.mu.Lock()
	stalled := b.d.cc
	b.d.mu.Unlock()
	stalled.Stop()
	<-stalled.Closed()

	res, err := b.d.Dispatch(timeout(t, 20*time.Second), "", []envelope.ToolUseBlock{use("after", "echo", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].IsError || res[0].CallID != "after" {
		t.Fatalf("result after the stall = %+v, want the tool's", res)
	}
	if n := b.d.restarts.Load(); n < 1 {
		t.Errorf("the watchdog made %d new consumers, want at least 1", n)
	}
	// The restart started before the last result, which came again and was
	// set aside as a duplicate, not delivered twice.
	if got := b.metrics.get("received", "echo"); got != 2 {
		t.Errorf("results received = %d, want 2", got)
	}
}

// While a slow tool runs and no result is waiting, the watchdog leaves the
// consumer alone.
func TestResultWatchdogLeavesIdleConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ResultCheckInterval = 100 * time.Millisecond })
	startWorker(t, b, "slow", func(w *fakeWorker, c *envelope.Call, _ nats.Header, reply reply) {
		w.Go(func(done <-chan struct{}) {
			select {
			case <-time.After(time.Second):
			case <-done:
				return
			}
			echoText(w, c, nil, reply)
		})
	})
	res, err := b.d.Dispatch(timeout(t, 20*time.Second), "", []envelope.ToolUseBlock{use("slow1", "slow", `{}`)})
	if err != nil || len(res) != 1 || res[0].IsError {
		t.Fatalf("Dispatch = %+v, %v", res, err)
	}
	if n := b.d.restarts.Load(); n != 0 {
		t.Errorf("the watchdog made %d new consumers while nothing was stuck, want 0", n)
	}
}
