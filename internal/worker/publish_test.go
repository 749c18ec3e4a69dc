package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// outageBundle is a provisioned server whose TOOL_RESULTS the test removes
// and brings back, a tool that counts its runs, and a worker serving it.
type outageBundle struct {
	testBundle
	runs atomic.Int32
}

func setupOutage(t *testing.T, mods ...func(*worker.Config)) *outageBundle {
	t.Helper()
	srv, _, j := natstest.StartProvisioned(t)
	b := &outageBundle{testBundle: testBundle{srv: srv, js: j, reg: tools.NewRegistry()}}
	counted := tool("counted", func(context.Context, json.RawMessage) (tools.Output, error) {
		b.runs.Add(1)
		return tools.Text("done"), nil
	})
	// Idempotent, so that it runs while TOOL_RESULTS is gone: a tool that
	// is not idempotent does not start before its stored result could be
	// looked up (e2e: TestStoredResultLookupFailureDoesNotRerunNonIdempotentTool).
	counted.Idempotent = true
	if err := b.reg.Register(counted); err != nil {
		t.Fatal(err)
	}
	b.start(t, mods...)
	return b
}

// removeResults deletes TOOL_RESULTS: results published now find no stream.
func (b *outageBundle) removeResults(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.js.DeleteStream(ctx, jetstream.StreamResults); err != nil {
		t.Fatalf("delete %s: %v", jetstream.StreamResults, err)
	}
}

// restoreResults provisions the topology again, creating TOOL_RESULTS.
func (b *outageBundle) restoreResults(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jetstream.Provision(ctx, b.js, jetstream.Config{}); err != nil {
		t.Fatalf("provision: %v", err)
	}
}

// waitRuns waits until the tool ran at least n times.
func (b *outageBundle) waitRuns(t *testing.T, n int32) {
	t.Helper()
	natstest.Eventually(t, waitLong, fmt.Sprintf("the tool to run %d times", n), func() bool { return b.runs.Load() >= n })
}

// awaitStoredResult polls TOOL_RESULTS for the result of call id.
func (b *outageBundle) awaitStoredResult(t *testing.T, id string) *envelope.Result {
	t.Helper()
	var m *js.RawStreamMsg
	natstest.Eventually(t, waitLong, "the result of "+id+" in "+jetstream.StreamResults, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := b.js.Stream(ctx, jetstream.StreamResults)
		if err == nil {
			m, err = s.GetLastMsgForSubject(ctx, jetstream.ResultFilter(replyTo))
		}
		return err == nil
	})
	r, err := envelope.DecodeResult(m.Data)
	if err != nil {
		t.Fatalf("stored result does not decode: %v", err)
	}
	if r.CallID != id {
		t.Fatalf("stored result is for %s, want %s", r.CallID, id)
	}
	return r
}

// callsLeft is the number of messages in TOOL_CALLS.
func (b *outageBundle) callsLeft(t *testing.T) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := b.js.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// A result that cannot be stored for a while is published again in place:
// the call runs once, its attempt count stays 1, and it is acked once the
// result is stored.
func TestResultPublishRetriedInPlace(t *testing.T) {
	t.Parallel()
	b := setupOutage(t, func(c *worker.Config) { c.PublishTimeout = 500 * time.Millisecond })
	b.removeResults(t)
	id := b.publish(t, "counted", `{}`)
	b.waitRuns(t, 1)
	time.Sleep(1500 * time.Millisecond) // a few failed publishes
	b.restoreResults(t)

	r := b.awaitStoredResult(t, id)
	if r.IsError || r.Attempts != 1 {
		t.Errorf("result: is_error=%v attempts=%d, want a success on attempt 1", r.IsError, r.Attempts)
	}
	natstest.Eventually(t, waitLong, "the acked call to leave "+jetstream.StreamCalls, func() bool { return b.callsLeft(t) == 0 })
	if n := b.runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1: the call must not run again while its result is retried", n)
	}
}

// With retries in place disabled, a failed result publish hands the call
// back: it runs again and its second delivery answers.
func TestResultPublishHandedBackWithoutRetry(t *testing.T) {
	t.Parallel()
	b := setupOutage(t, func(c *worker.Config) {
		c.PublishTimeout = 500 * time.Millisecond
		c.PublishRetryFor = -1
	})
	b.removeResults(t)
	id := b.publish(t, "counted", `{}`)
	b.waitRuns(t, 2) // handed back after the first failed publish, and run again
	b.restoreResults(t)
	r := b.awaitStoredResult(t, id)
	if r.Attempts < 2 {
		t.Errorf("result attempts = %d, want the second delivery", r.Attempts)
	}
}
