package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestExecStdinToStdout(t *testing.T) {
	t.Parallel()
	ts := loadTools(t, Options{}, helperEntry(t, "cat", "", "cat"))
	in := `{"text":"héllo"}`
	out, err := ts["cat"].Handler(t.Context(), json.RawMessage(in))
	if err != nil {
		t.Fatalf("error: %v", err)
	}
	if got := out.Content.Text(); got != in {
		t.Errorf("content %q, want the input %q", got, in)
	}
}

// TestExecNoShell: the input only ever reaches stdin; shell syntax in it
// runs nothing.
func TestExecNoShell(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(dir, "pwned")
	ts := loadTools(t, Options{}, helperEntry(t, "cat", "", "cat"))
	in, _ := json.Marshal(map[string]string{
		"a": `"; touch ` + mark + `; echo "`,
		"b": "$(touch " + mark + ")",
		"c": "`touch " + mark + "`",
	})
	out, err := ts["cat"].Handler(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Content.Text() != string(in) {
		t.Errorf("content %q, want the input unchanged", out.Content.Text())
	}
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the input ran a command: %s exists (%v)", mark, err)
	}
}

func TestExecEnvAllowList(t *testing.T) {
	t.Parallel()
	ts := loadTools(t, Options{}, helperEntry(t, "env", "", "env"))
	out, err := ts["env"].Handler(t.Context(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, kv := range strings.Split(out.Content.Text(), "\n") {
		got[kv] = true
	}
	want := []string{"FOO=foo-value", "PATH=" + PathDefault, helperEnv + "=1"}
	for _, kv := range want {
		if !got[kv] {
			t.Errorf("environment lacks %s: %q", kv, out.Content.Text())
		}
	}
	if len(got) != len(want) {
		t.Errorf("environment has %d variables, want only %v: %q", len(got), want, out.Content.Text())
	}
}

func TestExecExitPermanentWithStderrTail(t *testing.T) {
	t.Parallel()
	ts := loadTools(t, Options{}, helperEntry(t, "fail", "", "exit", "1"))
	_, err := ts["fail"].Handler(t.Context(), json.RawMessage(`{}`))
	d := classify.Classify(err)
	if d.Class != envelope.ClassPermanent || d.Retryable {
		t.Fatalf("class %s retryable %v, want permanent", d.Class, d.Retryable)
	}
	if !strings.Contains(d.Cause, "its program exited with status 1") ||
		!strings.Contains(d.Cause, "last words: the input was rejected") ||
		!strings.Contains(d.Cause, "stderr line 200 of the helper") {
		t.Errorf("cause lacks the status or the end of stderr: %q", d.Cause)
	}
	if strings.Contains(d.Cause, "stderr line 1 of") || len(d.Cause) > StderrTailBytes+200 {
		t.Errorf("cause holds more than the tail of stderr (%d bytes): %q", len(d.Cause), d.Cause)
	}
	msg := d.Message(classify.MessageInput{Tool: "fail", Attempts: 1})
	if !strings.HasPrefix(msg, "The tool fail failed: its program exited with status 1") || strings.Contains(msg, "attempts") {
		t.Errorf("message for the model: %q", msg)
	}
}

func TestExecExit75Transient(t *testing.T) {
	t.Parallel()
	counter := filepath.Join(t.TempDir(), "runs")
	ts := loadTools(t, Options{}, helperEntry(t, "busy", "", "tempfail", counter, "1"))
	_, err := ts["busy"].Handler(t.Context(), json.RawMessage(`{}`))
	if d := classify.Classify(err); d.Class != envelope.ClassTransient || !d.Retryable ||
		!strings.Contains(d.Cause, "temporary failure (exit status 75)") || !strings.Contains(d.Cause, "the backend is busy") {
		t.Fatalf("exit 75: %+v", d)
	}
	out, err := ts["busy"].Handler(t.Context(), json.RawMessage(`{}`))
	if err != nil || out.Content.Text() != "ok after 2 runs" {
		t.Fatalf("second run: %q, %v", out.Content.Text(), err)
	}
}

// TestExecExit75ThroughThePool: a command that fails with EX_TEMPFAIL twice
// is retried by JetStream redelivery and succeeds on the third attempt.
func TestExecExit75ThroughThePool(t *testing.T) {
	t.Parallel()
	counter := filepath.Join(t.TempDir(), "runs")
	ts := loadTools(t, Options{}, helperEntry(t, "busy",
		"    retry: {max_attempts: 3, base_delay: 50ms, max_delay: 100ms}\n", "tempfail", counter, "2"))
	p := startPool(t, ts["busy"])
	res := p.call(t, "busy", `{}`)
	if res.IsError || res.Content.Text() != "ok after 3 runs" || res.Attempts != 3 {
		t.Fatalf("result: is_error %v attempts %d content %q", res.IsError, res.Attempts, res.Content.Text())
	}

	// A permanent failure is answered at once, with the tail of stderr.
	fail := loadTools(t, Options{}, helperEntry(t, "fail", "", "exit", "3"))["fail"]
	p = startPool(t, fail)
	res = p.call(t, "fail", `{}`)
	if !res.IsError || res.Class != envelope.ClassPermanent || res.Attempts != 1 ||
		!strings.Contains(res.Content.Text(), "exited with status 3") || !strings.Contains(res.Content.Text(), "last words") {
		t.Fatalf("permanent failure: %+v %q", res, res.Content.Text())
	}
}

func TestExecOutputCap(t *testing.T) {
	t.Parallel()
	ts := loadTools(t, Options{}, helperEntry(t, "big", "", "big", "100000"))
	out, err := ts["big"].Handler(t.Context(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	text := out.Content.Text()
	if len(text) > 1000 || !strings.Contains(text, "[Output truncated: ") || !strings.Contains(text, "of 100,000 bytes were left out") {
		t.Errorf("%d bytes: %q", len(text), text)
	}
	if want := envelope.TruncateHead(strings.Repeat("x", 1000), 100000, 1000); text != want {
		t.Errorf("content %q, want %q", text, want)
	}
}

// TestExecTimeoutKillsProcessGroup: at the end of its time a command that
// ignores SIGTERM, and the grandchild it started that ignores it too, are
// both killed.
func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	ts := loadTools(t, Options{}, helperEntry(t, "hang", "", "hang", pidFile))

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan runResult, 1)
	go func() {
		_, err := ts["hang"].Handler(ctx, json.RawMessage(`{}`))
		done <- runResult{err, time.Now()}
	}()
	pids := waitPids(t, pidFile, done)
	// The attempt's time runs out: the worker cancels the context.
	cancelled := time.Now()
	cancel(context.DeadlineExceeded)
	r := <-done
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("error %v, want the context's", r.err)
	}
	// SIGTERM was ignored, so it took the grace (200ms) and a SIGKILL.
	if waited := r.at.Sub(cancelled); waited < 200*time.Millisecond {
		t.Errorf("returned %v after the cancel; the SIGTERM grace is 200ms", waited)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

// runResult is how a handler run in the background ended, and when.
type runResult struct {
	err error
	at  time.Time
}

// waitPids waits for the helper to write its pid and its grandchild's.
func waitPids(t *testing.T, pidFile string, done <-chan runResult) []int {
	t.Helper()
	var pids []int
	natstest.Eventually(t, 30*time.Second, "the helper to write its pids", func() bool {
		select {
		case r := <-done:
			t.Fatalf("the command ended before it started its grandchild: %v", r.err)
		default:
		}
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pids = pids[:0]
		for _, f := range strings.Fields(string(data)) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
		return len(pids) == 2
	})
	return pids
}

// waitGone waits until pid no longer runs (gone, or a zombie waiting for its
// parent: it runs no code).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	gone := func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		i := strings.LastIndexByte(string(stat), ')')
		return i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z")
	}
	defer func() {
		if !gone() { // it survived the call's timeout: do not leave it behind
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	natstest.Eventually(t, 30*time.Second, fmt.Sprintf("process %d to end with the call's timeout", pid), gone)
}

// TestExecTimeoutThroughThePool: through the worker, a command that runs
// past its timeout is a transient timeout, and a polite one (it exits on
// SIGTERM) ends at once.
func TestExecTimeoutThroughThePool(t *testing.T) {
	t.Parallel()
	ts := loadTools(t, Options{}, helperEntry(t, "slow", "    timeout: 300ms\n    retry: {max_attempts: 1}\n", "sleep"))
	p := startPool(t, ts["slow"])
	res := p.call(t, "slow", `{}`)
	if !res.IsError || res.Code != classify.CodeTimeout || res.Class != envelope.ClassTransient {
		t.Fatalf("result %+v %q", res, res.Content.Text())
	}
	if want := "The tool slow did not answer within 300ms."; !strings.HasPrefix(res.Content.Text(), want) {
		t.Errorf("content %q, want it to start with %q", res.Content.Text(), want)
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	var b tailBuffer
	b.max = 10
	_, _ = b.Write([]byte("first line\nsecond\nthird"))
	if got := b.String(); got != "…third" {
		t.Errorf("tail %q", got)
	}
	b = tailBuffer{max: 100}
	_, _ = b.Write([]byte("short"))
	if got := b.String(); got != "short" {
		t.Errorf("tail %q", got)
	}
}

// TestExecCallEnv: each attempt's command learns its call the way a
// webhook does from its headers: the call id, the attempt and the trace
// context, which a listed variable of the same name cannot override.
func TestExecCallEnv(t *testing.T) {
	t.Parallel()
	env := loadTools(t, Options{}, helperEntry(t, "env", "", "env"))["env"]
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := tools.WithCallInfo(t.Context(), tools.CallInfo{ID: "toolu_env", Attempt: 2, Traceparent: tp})
	out, err := env.Handler(ctx, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(out.Content.Text(), "\n")
	for _, kv := range []string{EnvCallID + "=toolu_env", EnvAttempt + "=2", EnvTraceparent + "=" + tp, "FOO=foo-value"} {
		if !slices.Contains(got, kv) {
			t.Errorf("environment lacks %s: %q", kv, got)
		}
	}

	// Through the pool: the worker's own call info.
	p := startPool(t, env)
	res := p.call(t, "env", `{}`)
	if res.IsError || !slices.Contains(strings.Split(res.Content.Text(), "\n"), EnvCallID+"="+res.CallID) ||
		!slices.Contains(strings.Split(res.Content.Text(), "\n"), EnvAttempt+"=1") {
		t.Errorf("through the pool (call %s): %q", res.CallID, res.Content.Text())
	}
	t.Logf("through the pool: %q", res.Content.Text())
}

// TestCallEnvOverridesAndNUL: the attempt's variables come last (exec
// keeps the last of a name), and a value no environment can carry is left
// out rather than failing the start.
func TestCallEnvOverridesAndNUL(t *testing.T) {
	t.Parallel()
	ctx := tools.WithCallInfo(t.Context(), tools.CallInfo{ID: "bad\x00id", Attempt: 1, Traceparent: "00-tp"})
	env := callEnv(ctx, []string{"TRACEPARENT=from-the-worker", "PATH=/bin"})
	want := []string{"TRACEPARENT=from-the-worker", "PATH=/bin", EnvAttempt + "=1", EnvTraceparent + "=00-tp"}
	if !slices.Equal(env, want) {
		t.Errorf("callEnv = %q, want %q", env, want)
	}
	if got := callEnv(t.Context(), []string{"PATH=/bin"}); !slices.Equal(got, []string{"PATH=/bin"}) {
		t.Errorf("callEnv without a call = %q", got)
	}
}
