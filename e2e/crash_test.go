package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// A worker that dies mid-call (its connection gone, the call not acked)
// loses nothing: once its heartbeats stop, JetStream redelivers the call
// after the consumer's AckWait (the liveness window, not the tool's
// timeout; here 4 s, the default being 20 s) to another worker, which
// completes it, and the caller gets one result.
func TestCrashedWorkerCallRedelivered(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	const ackWait = 4 * time.Second // both workers: each brings the consumer to its own
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	ranOn := map[int]string{} // attempt → worker id
	tool := tools.Tool{
		Name:        "long_job",
		Description: "hangs on its first attempt",
		InputSchema: anySchema,
		Timeout:     timeout,
		Retry:       fastRetry,
		Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
			ci, _ := tools.CallInfoFrom(ctx)
			mu.Lock()
			ranOn[ci.Attempt] = ci.WorkerID
			mu.Unlock()
			if ci.Attempt == 1 {
				started <- struct{}{}
				<-ctx.Done() // the worker dies meanwhile
				return tools.Output{}, ctx.Err()
			}
			return tools.Text("finished"), nil
		},
	}
	p := newPool(t, tool)
	dying, dyingConn := startWorkerOn(t, p.srv.ClientURL(), p.reg, func(c *worker.Config) { c.WorkerID, c.AckWait = "dying", ackWait })
	if got := natstest.CallConsumerInfo(t, p.js, "long_job").Config.AckWait; got != ackWait {
		t.Errorf("tool_long_job's AckWait is %v; want the workers' %v", got, ackWait)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	turn := p.dispatchAsync(ctx, toolUse("long_job", `{}`))
	select {
	case <-started:
	case <-time.After(waitLong):
		t.Fatal("the first attempt never started")
	}
	crashed := time.Now()
	dyingConn.Close() // no ack, no nak, no heartbeat: as if the process died
	survivor := p.startWorker(func(c *worker.Config) { c.WorkerID, c.AckWait = "survivor", ackWait })

	res := await(t, turn)[0]

	if res.IsError || res.Content.Text() != "finished" {
		t.Fatalf("result = %+v; want success", res)
	}
	if res.WorkerID != survivor.ID() || res.Attempts != 2 {
		t.Errorf("result from worker %q on attempt %d; want %q on attempt 2", res.WorkerID, res.Attempts, survivor.ID())
	}
	mu.Lock()
	if ranOn[1] != dying.ID() || ranOn[2] != survivor.ID() || len(ranOn) != 2 {
		t.Errorf("attempts ran on %v; want 1 on %s, 2 on %s", ranOn, dying.ID(), survivor.ID())
	}
	mu.Unlock()
	t.Logf("redelivered %v after the crash", time.Since(crashed).Round(time.Millisecond))
	if n := len(streamMsgs(t, p.js, jetstream.StreamResults, jetstream.ResultFilter(p.d.Instance()))); n != 1 {
		t.Errorf("TOOL_RESULTS holds %d results for the caller, want 1", n)
	}
	eventually(t, "TOOL_CALLS to be empty", func() bool { return streamState(t, p.js, jetstream.StreamCalls).Msgs == 0 })
}

// SIGTERM to a worker process with calls in flight: the calls that finish
// within the drain timeout are answered by it, the others are handed back
// and completed by another worker; every call gets exactly one success,
// and the process exits 0.
func TestWorkerProcessSIGTERMDrains(t *testing.T) {
	t.Parallel()
	p := newPool(t, demo.Echo(), demo.Sleep(), demo.Flaky())

	const drain = time.Second
	proc := proctest.Start(t, workerBin,
		"--nats-url", p.srv.ClientURL(), "--demo-tools", "--builtin-tools=false", "--drain-timeout", drain.String(),
		"--id", "process-worker", "--log-level", "debug")

	// The process is serving once it answers an echo (nothing else serves
	// echo) and has announced its tools, the last step of its start.
	if res := p.call("echo", `{"text":"ready?"}`); res.IsError || res.WorkerID != "process-worker" {
		t.Fatalf("echo through the worker process: %+v", res)
	}
	for _, tool := range p.reg.Names() {
		waitAnnounced(t, p.js, tool, "process-worker")
	}

	const short, long = 10, 10
	var blocks []envelope.ToolUseBlock
	wantMS := map[string]int{}
	longCall := map[string]bool{}
	for i := range short + long {
		ms := 300 + 50*i // 300..750 ms: done within the 1s drain
		if i >= short {
			ms = 2000 + 100*(i-short) // 2.0..2.9 s: longer than the drain
		}
		b := toolUse("sleep", fmt.Sprintf(`{"ms":%d}`, ms))
		blocks = append(blocks, b)
		wantMS[b.ID] = ms
		longCall[b.ID] = i >= short
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	dispatched := time.Now()
	turn := p.dispatchAsync(ctx, blocks...)
	eventually(t, "all sleep calls in flight on the process", func() bool {
		info := natstest.CallConsumerInfo(t, p.js, "sleep")
		return info.NumAckPending == short+long && info.NumPending == 0
	})

	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A call that would still run when the drain ends must be handed back
	// (the margin covers signal delivery on a busy machine).
	mustHandBack := time.Since(dispatched) + drain + 500*time.Millisecond
	p.startWorker(func(c *worker.Config) { c.WorkerID = "takeover-worker" })

	results := await(t, turn)

	if len(results) != short+long {
		t.Fatalf("%d results, want %d", len(results), short+long)
	}
	byWorker := map[string]int{}
	handedBack := 0
	for i, r := range results {
		id := blocks[i].ID
		want := fmt.Sprintf("slept %d ms", wantMS[id])
		if r.IsError || r.Content.Text() != want {
			t.Errorf("call %s: result %+v; want %q", id, r, want)
			continue
		}
		byWorker[r.WorkerID]++
		if time.Duration(wantMS[id])*time.Millisecond > mustHandBack && r.WorkerID != "takeover-worker" {
			t.Errorf("call %s of %d ms, longer than the drain, was answered by %q; want it handed back to takeover-worker",
				id, wantMS[id], r.WorkerID)
		}
		if longCall[id] && r.WorkerID == "takeover-worker" {
			handedBack++
		}
		if r.WorkerID != "process-worker" && r.WorkerID != "takeover-worker" {
			t.Errorf("call %s answered by unknown worker %q", id, r.WorkerID)
		}
	}
	t.Logf("results by worker: %v", byWorker)
	if handedBack == 0 {
		t.Error("no call was handed back to takeover-worker")
	}
	if t.Failed() {
		info := natstest.CallConsumerInfo(t, p.js, "sleep")
		t.Logf("consumer tool_sleep: ack pending %d, redelivered %d, waiting pulls %d, pending %d, delivered %+v, ack floor %+v",
			info.NumAckPending, info.NumRedelivered, info.NumWaiting, info.NumPending, info.Delivered, info.AckFloor)
	}

	resMsgs := streamMsgs(t, p.js, jetstream.StreamResults, jetstream.ResultFilter(p.d.Instance()))
	seen := map[string]int{}
	for _, m := range resMsgs {
		r, err := envelope.DecodeResult(m.Data)
		if err != nil {
			t.Fatalf("a result does not decode: %v", err)
		}
		seen[r.CallID]++
	}
	for _, b := range blocks {
		if seen[b.ID] != 1 {
			t.Errorf("call %s has %d results in TOOL_RESULTS, want exactly 1", b.ID, seen[b.ID])
		}
	}

	if code := proc.Wait(waitLong); code != 0 {
		t.Errorf("worker process exited with status %d, want 0", code)
	}
	eventually(t, "TOOL_CALLS to be empty", func() bool { return streamState(t, p.js, jetstream.StreamCalls).Msgs == 0 })
}

// waitAnnounced waits until workerID has announced tool in the live-tools
// bucket.
func waitAnnounced(t *testing.T, j js.JetStream, tool, workerID string) {
	t.Helper()
	eventually(t, tool+" announced by "+workerID, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		kv, err := j.KeyValue(ctx, discovery.BucketDefault)
		if err != nil {
			return false
		}
		_, err = kv.Get(ctx, discovery.Key(tool, workerID))
		return err == nil
	})
}

// SIGTERM while the worker process is still starting (its consumers already
// pulling, its tools not yet announced) is a shutdown like any other: the
// calls it took are handed back within the drain timeout, none is lost,
// and the process exits 0.
func TestWorkerProcessSIGTERMDuringStartup(t *testing.T) {
	t.Parallel()
	p := newPool(t, demo.Echo(), demo.Sleep(), demo.Flaky())

	// Queued before the process starts, so its consumers take them at once.
	const calls, ms = 5, 4000 // each longer than the 1s drain
	var blocks []envelope.ToolUseBlock
	for range calls {
		blocks = append(blocks, toolUse("sleep", fmt.Sprintf(`{"ms":%d}`, ms)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	turn := p.dispatchAsync(ctx, blocks...)
	eventually(t, "the calls to be queued", func() bool { return streamState(t, p.js, jetstream.StreamCalls).Msgs == calls })

	proc := proctest.Start(t, workerBin,
		"--nats-url", p.srv.ClientURL(), "--demo-tools", "--builtin-tools=false", "--drain-timeout", "1s",
		"--id", "process-worker", "--log-level", "debug")
	// Signal as soon as the process holds the calls: its start is then
	// still announcing the tools.
	deadline := time.Now().Add(waitLong)
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := p.js.Consumer(cctx, jetstream.StreamCalls, jetstream.ConsumerName("sleep"))
		held := false
		if err == nil {
			if info, err := c.Info(cctx); err == nil {
				held = info.NumAckPending == calls
			}
		}
		ccancel()
		if held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker process never took the calls")
		}
		time.Sleep(time.Millisecond)
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.startWorker(func(c *worker.Config) { c.WorkerID = "takeover-worker" })

	results := await(t, turn)
	want := fmt.Sprintf("slept %d ms", ms)
	for i, r := range results {
		if r.IsError || r.Content.Text() != want {
			t.Errorf("call %s: result %+v; want %q", blocks[i].ID, r, want)
		}
		if r.WorkerID != "takeover-worker" {
			t.Errorf("call %s of %d ms, longer than the 1s drain, was answered by %q; want it handed back",
				blocks[i].ID, ms, r.WorkerID)
		}
	}
	if code := proc.Wait(waitLong); code != 0 {
		t.Errorf("worker process signalled during its start exited with status %d, want 0", code)
	}
}
