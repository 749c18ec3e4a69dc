package dlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/testbin"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// buildWorker builds cmd/worker (once per go test run: testbin shares it).
func buildWorker(t *testing.T) string {
	t.Helper()
	return testbin.Program(t, "./cmd/worker")
}

// supervisor keeps n worker processes running: whenever one exits, it is
// started again, as a process supervisor (systemd, Kubernetes) would.
type supervisor struct {
	t    *testing.T
	bin  string
	args []string

	mu       sync.Mutex
	stopping bool
	running  map[int]*exec.Cmd
	exits    []int // exit codes, in order
	wg       sync.WaitGroup
}

func supervise(t *testing.T, bin string, n int, args ...string) *supervisor {
	s := &supervisor{t: t, bin: bin, args: args, running: map[int]*exec.Cmd{}}
	for slot := range n {
		s.wg.Go(func() { s.keep(slot) })
	}
	t.Cleanup(s.stop)
	return s
}

func (s *supervisor) keep(slot int) {
	for gen := 0; ; gen++ {
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		cmd := exec.Command(s.bin, append(s.args, "--id", fmt.Sprintf("proc-%d-%d", slot, gen))...)
		cmd.Stderr = &lineLogger{t: s.t, prefix: fmt.Sprintf("worker %d.%d: ", slot, gen), s: s}
		if err := cmd.Start(); err != nil {
			s.mu.Unlock()
			s.t.Errorf("start worker: %v", err)
			return
		}
		s.running[slot] = cmd
		s.mu.Unlock()

		err := cmd.Wait()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		s.mu.Lock()
		delete(s.running, slot)
		s.exits = append(s.exits, code)
		s.mu.Unlock()
	}
}

// crashes counts the processes that exited with demo.CrashExitCode.
func (s *supervisor) crashes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.exits {
		if c == demo.CrashExitCode {
			n++
		}
	}
	return n
}

func (s *supervisor) stop() {
	s.mu.Lock()
	s.stopping = true
	for _, cmd := range s.running {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// lineLogger writes a process's stderr to the test log while the test runs.
type lineLogger struct {
	t      *testing.T
	prefix string
	s      *supervisor
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.s.mu.Lock()
	done := l.s.stopping
	l.s.mu.Unlock()
	if !done {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			l.t.Log(l.prefix + line)
		}
	}
	return len(p), nil
}

// A call that kills every worker process that runs it (flaky, "crash"),
// against worker processes that a supervisor restarts: once the call has
// been delivered MaxDeliver times the poison watcher sets it aside with
// reason poison, its caller gets an is_error result, and the workers keep
// serving other calls. It takes MaxDeliver (5 for flaky) ack waits: every
// worker process runs with --ack-wait 4s (the default, 20 s, would make it
// 100 s), the same value for all of them since each brings the consumer to
// its own when it starts; 4 s keeps a heartbeat (AckWait/4) every second
// for the calls the live workers hold, so none is redelivered under load.
func TestPoisonCallWithCrashingWorkerProcesses(t *testing.T) {
	t.Parallel()
	bin := buildWorker(t)
	b := setup(t)
	history := openHistory(t, b.js)
	poisoned := make(chan dlq.PoisonCall, 1)
	startWatcher(t, b, history, func(pc dlq.PoisonCall) { poisoned <- pc })
	d := startDispatcher(t, b.js, "flaky", "echo")
	const ackWait = 4 * time.Second
	sup := supervise(t, bin, 2, "--nats-url", b.srv.ClientURL(), "--demo-tools", "--builtin-tools=false",
		"--log-level", "warn", "--drain-timeout", "2s", "--ack-wait", ackWait.String())

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := newID()
	type answer struct {
		res []envelope.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := d.Dispatch(ctx, "", []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: "flaky",
			Input: json.RawMessage(`{"fail":"crash","times":1000}`)}})
		done <- answer{res, err}
	}()

	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		t.Fatal("no result for the poison call")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	res := a.res[0]
	maxDeliver := classify.MaxAttemptsDefault + jetstream.MaxDeliverMargin
	if !res.IsError || res.Class != envelope.ClassInternal || res.Code != classify.CodePoison || res.Attempts != maxDeliver {
		t.Fatalf("result = %+v; want is_error internal poison after %d attempts", res, maxDeliver)
	}
	if !strings.Contains(res.Content.Text(), "Do not call it again with the same input") {
		t.Errorf("content = %q", res.Content.Text())
	}
	var pc dlq.PoisonCall
	select {
	case pc = <-poisoned:
	case <-ctx.Done():
		t.Fatal("the watcher did not report the poison call")
	}
	if pc.CallID != id || pc.Deliveries != maxDeliver || !pc.Answered {
		t.Errorf("poison call = %+v", pc)
	}
	s := newStore(t, b)
	ls, err := s.List(ctxFor(t), dlq.Filter{Reason: classify.FatePoison})
	if err != nil || len(ls) != 1 || ls[0].Entry == nil || ls[0].Entry.CallID != id || ls[0].Entry.Deliveries != maxDeliver {
		t.Fatalf("poison dead letters = %v, %v", ls, err)
	}
	if n := sup.crashes(); n != maxDeliver {
		t.Errorf("%d worker processes crashed, want one per delivery (%d)", n, maxDeliver)
	}
	for _, tool := range []string{"flaky", "echo"} {
		if got := natstest.CallConsumerInfo(t, b.js, tool).Config.AckWait; got != ackWait {
			t.Errorf("tool_%s's AckWait is %v; want the workers' --ack-wait %v", tool, got, ackWait)
		}
	}

	// The workers keep serving.
	for i := range 3 {
		eres, err := d.Dispatch(ctxFor(t), "", []envelope.ToolUseBlock{{Type: "tool_use", ID: newID(), Name: "echo",
			Input: json.RawMessage(fmt.Sprintf(`{"text":"still here %d"}`, i))}})
		if err != nil {
			t.Fatal(err)
		}
		if eres[0].IsError || eres[0].Content.Text() != fmt.Sprintf("still here %d", i) || !strings.HasPrefix(eres[0].WorkerID, "proc-") {
			t.Errorf("echo after the poison call = %+v", eres[0])
		}
	}
	// The last echo's ack may reach the server just after its result reached
	// us: give the work queue a moment to drop it.
	for wait := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := streamMsgs(t, b.js, jetstream.StreamCalls)
		if n == 0 {
			break
		}
		if time.Now().After(wait) {
			t.Errorf("TOOL_CALLS still holds %d calls", n)
			break
		}
	}
}
