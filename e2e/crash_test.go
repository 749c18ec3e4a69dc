package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
	"github.com/toolpool/toolpool/pkg/worker"
)

// A worker that dies mid-call (its connection gone, the call not acked)
// loses nothing: after AckWait JetStream redelivers the call to another
// worker, which completes it, and the caller gets one result.
func TestCrashedWorkerCallRedelivered(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second // AckWait: max(3s+5s, 10s) = 10s
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
	if got := jetstream.AckWaitFor(timeout); got != jetstream.AckWaitMin {
		t.Fatalf("AckWait of the test tool = %v, want the minimum %v", got, jetstream.AckWaitMin)
	}
	dying, dyingConn := startWorkerOn(t, p.srv.ClientURL(), p.reg, func(c *worker.Config) { c.WorkerID = "dying" })

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
	survivor := p.startWorker(func(c *worker.Config) { c.WorkerID = "survivor" })

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
	if n := len(streamMsgs(t, p.js, jetstream.StreamResults, jetstream.ResultSubject(p.d.Instance()))); n != 1 {
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
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	p := newPool(t)
	p.reg = reg
	p.d = startDispatcher(t, p.js, dispatchCatalog(reg))

	var stderr lockedBuffer
	cmd := exec.Command(workerBin,
		"--nats-url", p.srv.ClientURL(), "--demo-tools", "--drain-timeout", "1s",
		"--id", "process-worker", "--log-level", "debug")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("worker process stderr:\n%s", stderr.String())
		}
	})

	// The process is serving once it answers an echo: nothing else serves.
	if res := p.call("echo", `{"text":"ready?"}`); res.IsError || res.WorkerID != "process-worker" {
		t.Fatalf("echo through the worker process: %+v", res)
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
	turn := p.dispatchAsync(ctx, blocks...)
	eventually(t, "all sleep calls in flight on the process", func() bool {
		info := consumerInfo(t, p.js, "sleep")
		return info.NumAckPending == short+long && info.NumPending == 0
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.startWorker(func(c *worker.Config) { c.WorkerID = "takeover-worker" })

	results := await(t, turn)

	if len(results) != short+long {
		t.Fatalf("%d results, want %d", len(results), short+long)
	}
	byWorker := map[string]int{}
	for i, r := range results {
		id := blocks[i].ID
		want := fmt.Sprintf("slept %d ms", wantMS[id])
		if r.IsError || r.Content.Text() != want {
			t.Errorf("call %s: result %+v; want %q", id, r, want)
			continue
		}
		byWorker[r.WorkerID]++
		if longCall[id] && r.WorkerID != "takeover-worker" {
			t.Errorf("call %s of %d ms, longer than the drain, was answered by %q; want it handed back to takeover-worker",
				id, wantMS[id], r.WorkerID)
		}
		if r.WorkerID != "process-worker" && r.WorkerID != "takeover-worker" {
			t.Errorf("call %s answered by unknown worker %q", id, r.WorkerID)
		}
	}
	t.Logf("results by worker: %v", byWorker)

	resMsgs := streamMsgs(t, p.js, jetstream.StreamResults, jetstream.ResultSubject(p.d.Instance()))
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

	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("worker process exited with %v, want status 0", err)
		}
	case <-time.After(waitLong):
		t.Fatal("the worker process did not exit after SIGTERM")
	}
	if !strings.Contains(stderr.String(), "draining") {
		t.Errorf("the worker process did not log its drain")
	}
	eventually(t, "TOOL_CALLS to be empty", func() bool { return streamState(t, p.js, jetstream.StreamCalls).Msgs == 0 })
}
