// Package proctest runs the programs that real-process tests drive (the
// project's binaries that internal/testbin builds, nats-server, Node.js
// servers) as child processes of a test: their output kept for the test
// to read and for the log of a test that fails, their exit waited for,
// and nothing left running when the test ends.
//
//	p := proctest.Start(t, workerBin, "--nats-url", url, "--demo-tools")
//	p.WaitFor("workers started", time.Minute)
//	if err := p.Signal(syscall.SIGTERM); err != nil { ... }
//	if code := p.Wait(time.Minute); code != 0 { ... }
//
// A Command sets more than the path and the arguments:
//
//	p := proctest.Command{Name: "nats-1", Path: natsServerBin, Args: args, Env: env, Dir: confDir}.Start(t)
//
// Start registers a cleanup that kills the process if it still runs and,
// when the test failed, logs the end of its output. Free loopback ports
// for a process's listeners come from natstest.FreePorts and
// natstest.FreeAddr.
package proctest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
)

// LogTailDefault is how much of the end of a process's output a failed
// test logs when Command.LogTail is zero.
const LogTailDefault = 16 << 10

// Command is a program to run; Start runs it.
type Command struct {
	// Name names the process in failures and logs. Default: the base name
	// of Path.
	Name string
	// Path is the program's file.
	Path string
	// Args are the arguments, without the program's name.
	Args []string
	// Env is the environment, as in exec.Cmd: nil is the test's own.
	Env []string
	// Dir is the working directory. Default: a new t.TempDir(), so that
	// whatever the program creates by default is removed with the test.
	Dir string
	// LogTail is how many bytes of the end of the output a failed test
	// logs. Default LogTailDefault; negative logs all of it.
	LogTail int
}

// Start runs bin with args, as Command{Path: bin, Args: args}.Start(t).
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	return Command{Path: bin, Args: args}.Start(t)
}

// Start runs the command with its stdout and stderr both written to the
// Proc's Output, and fails the test when it cannot start. When the test
// ends the process is killed if it still runs, and a failed test logs the
// end of its output with how it ended.
func (c Command) Start(t testing.TB) *Proc {
	t.Helper()
	if c.Name == "" {
		c.Name = filepath.Base(c.Path)
	}
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	if c.LogTail == 0 {
		c.LogTail = LogTailDefault
	}
	p := &Proc{t: t, name: c.Name, cmd: exec.Command(c.Path, c.Args...), done: make(chan struct{}), logTail: c.LogTail}
	p.cmd.Env, p.cmd.Dir = c.Env, c.Dir
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("proctest: start %s: %v", c.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.cleanup)
	return p
}

// Proc is a running (or ended) process that Start started. Its methods
// that fail the test (Wait, Eventually and the Wait... helpers) must be
// called from the test's goroutine; the others from any.
type Proc struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	out     natstest.LockedBuffer
	logTail int
	done    chan struct{} // closed once the process has exited and been reaped
	err     error         // what cmd.Wait returned; valid once done is closed
}

// Name is the process's name in failures and logs.
func (p *Proc) Name() string { return p.name }

// PID is the process's id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Output is what the process wrote so far to its stdout and stderr.
func (p *Proc) Output() string { return p.out.String() }

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended, as exec.Cmd.Wait says: nil for exit
// status 0, an *exec.ExitError otherwise. It is nil while the process
// runs.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Status says how the process ended ("exited 0", "exit status 1",
// "signal: killed"), or "running".
func (p *Proc) Status() string {
	switch {
	case !p.Exited():
		return "running"
	case p.err == nil:
		return "exited 0"
	default:
		return p.err.Error()
	}
}

// Signal sends sig to the process. It fails (os.ErrProcessDone) once the
// process has exited.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the process with SIGKILL if it still runs, and waits until
// it has exited.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// Wait waits up to limit for the process to exit and returns its exit
// code (-1 when a signal ended it); it fails the test when the process
// still runs after limit.
func (p *Proc) Wait(limit time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		p.t.Fatalf("%s did not exit within %v", p.name, limit)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	p.t.Fatalf("%s: %v", p.name, p.err)
	return -1
}

// Eventually is natstest.Eventually for a condition that needs the
// process running: it fails the test at once, with the process's output,
// when the process exits before cond holds.
func (p *Proc) Eventually(limit time.Duration, what string, cond func() bool) {
	p.t.Helper()
	natstest.Eventually(p.t, limit, what, func() bool {
		if p.Exited() {
			p.t.Fatalf("%s exited (%s) while waiting for %s; output:\n%s", p.name, p.Status(), what, p.Output())
		}
		return cond()
	})
}

// WaitFor waits up to limit, as Eventually does, until the process's
// output contains text.
func (p *Proc) WaitFor(text string, limit time.Duration) {
	p.t.Helper()
	p.Eventually(limit, fmt.Sprintf("%s to write %q", p.name, text), func() bool {
		return strings.Contains(p.Output(), text)
	})
}

// WaitListening waits up to limit, as Eventually does, until addr
// (host:port) accepts TCP connections.
func (p *Proc) WaitListening(addr string, limit time.Duration) {
	p.t.Helper()
	p.Eventually(limit, fmt.Sprintf("%s to listen on %s", p.name, addr), func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
}

// WaitHTTP waits up to limit, as Eventually does, until GET url answers
// 200 OK (a readiness probe such as /readyz).
func (p *Proc) WaitHTTP(url string, limit time.Duration) {
	p.t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	p.Eventually(limit, fmt.Sprintf("GET %s to answer 200 OK", url), func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// cleanup kills the process if it still runs and, when the test failed,
// logs the end of its output with how it ended.
func (p *Proc) cleanup() {
	status := p.Status()
	p.Kill()
	if p.t.Failed() {
		p.t.Logf("--- %s (pid %d; at the end of the test: %s): output\n%s", p.name, p.PID(), status, Tail(p.Output(), p.logTail))
	}
}

// Tail is the last n bytes of s, marked as cut when they are not all of
// it; all of s when n is negative.
func Tail(s string, n int) string {
	if n < 0 || len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
