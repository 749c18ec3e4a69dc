package catalog

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The exec guard: one small process per worker process, the worker's own
// binary started again in guard mode (guardName as its argv[0] and
// guardEnv=1), which holds the read end of a pipe whose write end only the
// worker holds. The worker writes "+PGID" when an exec command's process
// group starts and "-PGID" once it is over; when the pipe ends (the
// worker exited, or was killed with SIGKILL and the kernel closed its
// files), the guard kills every group still registered, and exits.
const (
	guardName = "toolpool-exec-guard"
	guardEnv  = "TOOLPOOL_EXEC_GUARD"
	// guardRetryAfter is how long the worker waits before starting a
	// guard again after it could not.
	guardRetryAfter = time.Minute
)

func init() {
	if len(os.Args) == 1 && os.Args[0] == guardName && os.Getenv(guardEnv) == "1" {
		os.Exit(guardMain(os.Stdin))
	}
}

// guardMain is the guard process: it reads the registrations from in and,
// once in ends, kills the groups registered. Only the end of its worker
// ends it: signals a terminal or a service manager sends to the worker
// are ignored (it is in a process group of its own anyway).
func guardMain(in io.Reader) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGQUIT)
	guardLoop(in)
	return 0
}

// guardLoop keeps the groups registered on in and kills those left when
// in ends.
func guardLoop(in io.Reader) {
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// theGuard is the worker's exec guard, started with the first command.
var theGuard execGuard

// execGuard is the worker's side of the guard: the pipe to it and the
// groups registered.
type execGuard struct {
	mu       sync.Mutex
	w        *os.File // the guard's stdin; nil when none runs
	proc     *os.Process
	groups   map[int]struct{}
	failedAt time.Time // the last start that failed
}

// add registers pgid, starting a guard when none runs (or the one that
// ran is gone: it is replaced and told every group registered).
func (g *execGuard) add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.groups == nil {
		g.groups = map[int]struct{}{}
	}
	g.groups[pgid] = struct{}{}
	if g.w != nil {
		if _, err := fmt.Fprintf(g.w, "+%d\n", pgid); err == nil {
			return
		}
		g.stop()
	}
	g.start()
}

// remove forgets pgid, whose group is over.
func (g *execGuard) remove(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.groups, pgid)
	if g.w != nil {
		if _, err := fmt.Fprintf(g.w, "-%d\n", pgid); err != nil {
			g.stop() // the next add starts another
		}
	}
}

// start starts a guard and tells it every group registered. A guard that
// cannot start (no /proc, say) leaves only Pdeathsig: the command itself
// dies with the worker, what it started may not. Another start is tried
// after guardRetryAfter.
func (g *execGuard) start() {
	if !g.failedAt.IsZero() && time.Since(g.failedAt) < guardRetryAfter {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		g.failedAt = time.Now()
		return
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{guardName}, Env: []string{guardEnv + "=1"},
		Stdin: r, SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		g.failedAt = time.Now()
		return
	}
	g.w, g.proc = w, cmd.Process
	var b []byte
	for pgid := range g.groups {
		b = fmt.Appendf(b, "+%d\n", pgid)
	}
	if _, err := w.Write(b); err != nil {
		g.stop()
		g.failedAt = time.Now()
	}
}

// stop ends a guard that failed a write: killed first, so that closing
// its pipe cannot make it kill the groups still running; then reaped.
func (g *execGuard) stop() {
	_ = g.proc.Kill()
	_ = g.w.Close()
	_, _ = g.proc.Wait()
	g.w, g.proc = nil, nil
}
