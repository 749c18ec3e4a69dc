package proctest_test

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
)

// childEnv makes the test binary act as the child program named by its
// value instead of running the tests.
const childEnv = "PROCTEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// child is the program the tests start: "exit N" prints to both outputs
// and exits with N; "serve" prints "ready" and waits for SIGTERM, then
// exits 0; "listen ADDR" prints "listening" and serves HTTP on ADDR until
// it is killed: 200 OK on /readyz, 404 elsewhere.
func child(mode string, args []string) int {
	switch mode {
	case "exit":
		code, _ := strconv.Atoi(args[0])
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		return code
	case "serve":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		fmt.Println("ready")
		<-sig
		fmt.Println("terminated")
		return 0
	case "listen":
		l, err := net.Listen("tcp", args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println("listening")
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/readyz" {
				http.NotFound(w, r)
			}
		}))
		return 2
	}
	return 3
}

// start runs the test binary as the child program mode.
func start(t testing.TB, mode string, args ...string) *proctest.Proc {
	t.Helper()
	return proctest.Command{
		Name: "child-" + mode, Path: os.Args[0], Args: args,
		Env: append(os.Environ(), childEnv+"="+mode),
	}.Start(t)
}

func TestOutputAndExitCode(t *testing.T) {
	t.Parallel()
	p := start(t, "exit", "7")
	if code := p.Wait(time.Minute); code != 7 {
		t.Errorf("exit code %d, want 7", code)
	}
	if out := p.Output(); !strings.Contains(out, "to stdout") || !strings.Contains(out, "to stderr") {
		t.Errorf("output %q lacks stdout or stderr", out)
	}
	if !p.Exited() || p.Err() == nil || p.Status() != "exit status 7" {
		t.Errorf("Exited %v, Err %v, Status %q after exit 7", p.Exited(), p.Err(), p.Status())
	}
	if p.Name() != "child-exit" {
		t.Errorf("Name %q", p.Name())
	}
}

func TestSignalWaitForAndWait(t *testing.T) {
	t.Parallel()
	p := start(t, "serve")
	p.WaitFor("ready", time.Minute)
	if p.Exited() || p.Status() != "running" || p.Err() != nil {
		t.Fatalf("Exited %v, Status %q, Err %v while running", p.Exited(), p.Status(), p.Err())
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0\n%s", code, p.Output())
	}
	if !strings.Contains(p.Output(), "terminated") {
		t.Errorf("output %q", p.Output())
	}
	if err := p.Signal(syscall.SIGTERM); err == nil {
		t.Error("Signal to an exited process succeeded")
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	p := start(t, "serve")
	p.WaitFor("ready", time.Minute)
	p.Kill()
	if !p.Exited() || p.Status() != "signal: killed" {
		t.Errorf("after Kill: Exited %v, Status %q", p.Exited(), p.Status())
	}
	if code := p.Wait(time.Second); code != -1 {
		t.Errorf("exit code %d after Kill, want -1", code)
	}
	p.Kill() // again: nothing to do
}

func TestWaitListeningAndHTTP(t *testing.T) {
	t.Parallel()
	addr := natstest.FreeAddr(t)
	p := start(t, "listen", addr)
	p.WaitListening(addr, time.Minute)
	// The child listens, then prints: its line may come a moment after
	// the port answers.
	p.WaitFor("listening", time.Minute)
	p.WaitHTTP("http://"+addr+"/readyz", time.Minute)

	ft := &fakeT{TB: t}
	p2 := start(ft, "listen", natstest.FreeAddr(t))
	p2.WaitFor("listening", time.Minute)
	start := time.Now()
	ft.run(func() { p2.WaitHTTP("http://"+addr+"/elsewhere", time.Second) })
	if msg := ft.fatal; !strings.Contains(msg, "/elsewhere to answer 200 OK") || time.Since(start) > 30*time.Second {
		t.Errorf("WaitHTTP on a 404: failure %q after %v", msg, time.Since(start))
	}
	ft.runCleanups()
}

// TestCleanupKills: a process still running when its test ends is killed
// by the test's cleanup, its output logged when the test failed.
func TestCleanupKills(t *testing.T) {
	t.Parallel()
	ft := &fakeT{TB: t}
	p := start(ft, "serve")
	p.WaitFor("ready", time.Minute)
	ft.Errorf("the test fails")
	ft.runCleanups()
	if !p.Exited() {
		t.Fatal("the process runs after its test's cleanup")
	}
	logs := ft.logged()
	if !strings.Contains(logs, "--- child-serve") || !strings.Contains(logs, "running") || !strings.Contains(logs, "ready") {
		t.Errorf("a failed test's log of the process: %q", logs)
	}
}

// TestEventuallyFailsWhenTheProcessExits: waiting for something a process
// should do fails at once, naming the exit, when the process is gone.
func TestEventuallyFailsWhenTheProcessExits(t *testing.T) {
	t.Parallel()
	ft := &fakeT{TB: t}
	p := start(ft, "exit", "4")
	start := time.Now()
	ft.run(func() { p.WaitFor("never written", time.Minute) })
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("WaitFor took %v to notice the exit", d)
	}
	if msg := ft.fatal; !strings.Contains(msg, "exit status 4") || !strings.Contains(msg, "to stderr") {
		t.Errorf("failure %q does not say how the process ended and what it wrote", msg)
	}
	ft.runCleanups()
}

func TestTail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{{"abcdef", 3, "…def"}, {"abc", 3, "abc"}, {"abc", -1, "abc"}, {"", 2, ""}} {
		if got := proctest.Tail(tc.s, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// fakeT is a testing.TB whose failures and cleanups the test drives: its
// Fatalf ends the goroutine that run started, and its cleanups run when
// runCleanups is called.
type fakeT struct {
	testing.TB
	mu       sync.Mutex
	failed   bool
	fatal    string
	logs     strings.Builder
	cleanups []func()
}

func (f *fakeT) Helper() {}

func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed, f.fatal = true, fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeT) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *fakeT) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(&f.logs, format+"\n", args...)
}

func (f *fakeT) logged() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs.String()
}

// run runs fn on a goroutine of its own, as the testing package runs a
// test, so that Fatalf ends it, and waits for it.
func (f *fakeT) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func (f *fakeT) runCleanups() {
	f.mu.Lock()
	fns := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// TestParallelAtLeast raises -parallel when it was not given, and never
// lowers it.
func TestParallelAtLeast(t *testing.T) {
	f := flag.Lookup("test.parallel")
	before := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(before) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	want := runtime.GOMAXPROCS(0) + 3
	proctest.ParallelAtLeast(want)
	if got := f.Value.String(); !given && got != strconv.Itoa(want) {
		t.Errorf("-parallel %s after ParallelAtLeast(%d), want %d", got, want, want)
	} else if given && got != before {
		t.Errorf("-parallel %s given, %s after ParallelAtLeast", before, got)
	}
	proctest.ParallelAtLeast(1)
	if got := f.Value.String(); got == "1" {
		t.Errorf("ParallelAtLeast(1) lowered -parallel to 1")
	}
}
