package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// workerProc is a worker binary running for a test, killed when it ends.
type workerProc struct {
	*proctest.Proc
	metrics string // base URL of its --metrics server
}

// startWorker runs the worker binary against url with the demo tools and a
// --metrics server, and waits until its /readyz answers 200.
func startWorker(t *testing.T, bin, url, id string, env []string, args ...string) *workerProc {
	t.Helper()
	addr := natstest.FreeAddr(t)
	p := &workerProc{metrics: "http://" + addr}
	p.Proc = proctest.Command{
		Name: "worker " + id, Path: bin, Env: append(os.Environ(), env...),
		Args: append([]string{"--nats-url", url, "--demo-tools", "--builtin-tools=false", "--metrics", addr, "--id", id}, args...),
	}.Start(t)
	p.WaitHTTP(p.metrics+"/readyz", time.Minute)
	return p
}

// TestLongReplyToIsDeadLettered reproduces issue 12's first finding with
// three worker processes: a call whose reply_to is 5,000 characters long
// used to make each worker that took it fail its result publish with
// "maximum control line exceeded", which closes the connection for good, so
// the redelivered call took every worker off NATS in turn. Now the decoder
// refuses the call: it lands in TOOL_DLQ as malformed, every worker stays
// connected and ready, and later calls succeed.
func TestLongReplyToIsDeadLettered(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, _, j := natstest.StartProvisioned(t)
	var workers []*workerProc
	for i := range 3 {
		workers = append(workers, startWorker(t, bin, srv.ClientURL(), fmt.Sprintf("w%d", i), nil))
	}

	now := time.Now().UTC()
	bad := fmt.Sprintf(`{"v":1,"id":"toolu_long_reply","tool":"echo","input":{"text":"x"},"reply_to":%q,"created_at":%q,"deadline":%q}`,
		strings.Repeat("r", 5000), now.Format(time.RFC3339Nano), now.Add(time.Minute).Format(time.RFC3339Nano))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := j.Publish(ctx, jetstream.CallSubject("echo"), []byte(bad)); err != nil {
		t.Fatal(err)
	}

	var entry settle.Entry
	natstest.Eventually(t, time.Minute, "the call to be dead-lettered", func() bool {
		for _, w := range workers {
			select {
			case <-w.Done():
				t.Fatalf("a worker exited (%v):\n%s", w.Err(), w.Output())
			default:
			}
		}
		s, err := j.Stream(ctx, jetstream.StreamDLQ)
		if err != nil {
			return false
		}
		msg, err := s.GetLastMsgForSubject(ctx, jetstream.DLQSubject("echo"))
		if err != nil {
			return false
		}
		return json.Unmarshal(msg.Data, &entry) == nil
	})
	if entry.Reason != classify.FateMalformed || !strings.Contains(entry.Error, "reply_to") {
		t.Errorf("dead letter: reason %q, error %q; want malformed, naming reply_to", entry.Reason, entry.Error)
	}

	// No worker lost its connection: each is still ready (its readiness
	// checks NATS), and the server still counts all three clients.
	for i, w := range workers {
		if code, body := httpGet(t, w.metrics+"/readyz"); code != http.StatusOK {
			t.Errorf("worker %d: /readyz %d %s\n%s", i, code, body, w.Output())
		}
		if strings.Contains(w.Output(), "maximum control line") {
			t.Errorf("worker %d hit the control line limit:\n%s", i, w.Output())
		}
	}
	if n := srv.Server().NumClients(); n < 4 { // three workers and the test
		t.Errorf("the server has %d clients; want the three workers and the test's", n)
	}

	d, err := dispatch.New(dispatch.Config{JS: j, Catalog: discovery.ConsumerCatalog(j, time.Millisecond), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) }()
	var blocks []envelope.ToolUseBlock
	for i := range 20 {
		blocks = append(blocks, envelope.ToolUseBlock{Type: "tool_use", ID: fmt.Sprintf("toolu_after_%d", i), Name: "echo",
			Input: json.RawMessage(fmt.Sprintf(`{"text":"after %d"}`, i))})
	}
	res, err := d.Dispatch(ctx, "after-session", blocks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.IsError {
			t.Errorf("call %d after the bad one: %+v", i, r)
		}
	}
}

// TestWorkerRefusesLongID: the worker id goes into the keys of its
// announcements (subjects), so --id is bounded and refused before connecting.
func TestWorkerRefusesLongID(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	code := run(t.Context(), []string{"--demo-tools", "--nats-url", "nats://127.0.0.1:1", "--id", strings.Repeat("w", 5000)}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--id is 5000 bytes; the limit is 128") {
		t.Errorf("exit %d, stderr %q; want 2 and a message naming --id", code, stderr.String())
	}
}

// TestWorkerRefusesShortAckWait: a liveness window under a second would
// have live workers' calls delivered again between their heartbeats.
func TestWorkerRefusesShortAckWait(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	code := run(t.Context(), []string{"--demo-tools", "--nats-url", "nats://127.0.0.1:1", "--ack-wait", "500ms"}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--ack-wait is 500ms; it must be at least 1s") {
		t.Errorf("exit %d, stderr %q; want 2 and a message naming --ack-wait", code, stderr.String())
	}
}

// TestWorkerRefusesNonPositiveReconnectWait: --nats-reconnect-wait 0 is a
// usage error naming the flag, not a silent 2 s.
func TestWorkerRefusesNonPositiveReconnectWait(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	code := run(t.Context(), []string{"--demo-tools", "--nats-url", "nats://127.0.0.1:1", "--nats-reconnect-wait", "0s"}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--nats-reconnect-wait is 0s; it must be positive") {
		t.Errorf("exit %d, stderr %q; want 2 and a message naming --nats-reconnect-wait", code, stderr.String())
	}
}

// TestWorkerExitsWhenConnectionClosedForGood: a worker whose NATS
// connection is closed for good (here the server stops accepting its
// credentials: nats.go gives up after the second refusal) used to keep
// running, off NATS, with /healthz 200. Now it exits non-zero at once, so
// its supervisor starts a fresh one. The worker reconnects every 200 ms
// (--nats-reconnect-wait; 2 s by default, which only spaces the two
// refusals further apart).
func TestWorkerExitsWhenConnectionClosedForGood(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv := natstest.StartPasswordServer(t, "worker", "first-secret")
	url := srv.URL

	w := startWorker(t, bin, url, "revoked", []string{"NATS_USER=worker", "NATS_PASSWORD=first-secret"},
		"--nats-reconnect-wait", "200ms")
	if code, _ := httpGet(t, w.metrics+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz of a connected worker: %d", code)
	}
	// The operator changes the password: the server drops the worker's
	// connection and refuses its reconnects.
	srv.ChangePassword(t, "second-secret")
	select {
	case <-w.Done():
	case <-time.After(time.Minute):
		code, body := httpGet(t, w.metrics+"/healthz")
		t.Fatalf("the worker still runs a minute after its connection closed for good (/healthz %d %s):\n%s", code, body, w.Output())
	}
	var exit *exec.ExitError
	if !errors.As(w.Err(), &exit) || exit.ExitCode() == 0 {
		t.Errorf("the worker exited with %v; want a non-zero exit code", w.Err())
	}
	if !strings.Contains(w.Output(), "closed for good") {
		t.Errorf("the worker's log does not say why it exited:\n%s", w.Output())
	}
}

// TestKilledWorkersCallComesBackWithinLivenessWindow reproduces issue 12's
// fourth finding with real processes: a worker process holding a call of
// sleep (timeout 11 minutes) is killed with SIGKILL. The consumer's AckWait
// used to be the tool's timeout plus 5 s, so the call came back only after
// 11 min 5 s. AckWait is now a liveness window kept by heartbeats (here
// --ack-wait 4s, the default being 20 s), so a second worker gets the call
// that long after the victim's last heartbeat and answers it.
func TestKilledWorkersCallComesBackWithinLivenessWindow(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	srv, _, j := natstest.StartProvisioned(t)
	const ackWait = 4 * time.Second
	victim := startWorker(t, bin, srv.ClientURL(), "victim", nil, "--ack-wait", ackWait.String())

	d, err := dispatch.New(dispatch.Config{JS: j, Catalog: discovery.ConsumerCatalog(j, time.Millisecond),
		DefaultTimeout: 5 * time.Minute, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) }()
	if got := natstest.CallConsumerInfo(t, j, "sleep").Config.AckWait; got != ackWait {
		t.Errorf("tool_sleep's AckWait is %v; want the worker's --ack-wait %v, not the tool's timeout", got, ackWait)
	}
	type answer struct {
		res []envelope.Result
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := d.Dispatch(ctx, "crash-session", []envelope.ToolUseBlock{
			{Type: "tool_use", ID: "toolu_held_by_victim", Name: "sleep", Input: json.RawMessage(`{"ms":2000}`)},
		})
		answered <- answer{res, err}
	}()
	natstest.Eventually(t, time.Minute, "the victim to hold the call", func() bool {
		return natstest.CallConsumerInfo(t, j, "sleep").NumAckPending == 1
	})
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.Done()
	killed := time.Now()
	startWorker(t, bin, srv.ClientURL(), "survivor", nil, "--ack-wait", ackWait.String())

	const bound = time.Minute // far below sleep's 11-minute timeout; not a speed test
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatal(a.err)
		}
		r := a.res[0]
		if r.IsError || r.WorkerID != "survivor" || r.Attempts != 2 {
			t.Errorf("result %+v; want success from the survivor on attempt 2", r)
		}
		t.Logf("answered %v after the kill", time.Since(killed).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("the call held by the killed worker was not answered within %v of the kill (consumer: %+v)",
			bound, natstest.CallConsumerInfo(t, j, "sleep").Config)
	}
}
