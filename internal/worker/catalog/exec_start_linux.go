package catalog

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// startCommand starts cmd as the leader of a process group of its own that
// dies with the worker process:
//
//   - the leader gets SIGKILL when the worker dies (Pdeathsig). Linux sends
//     it when the thread that started the child ends, not the process, so
//     every command is started from one goroutine locked to its own thread
//     (starter), a thread that ends only while none of its children runs;
//   - the group is registered with the worker's exec guard (execGuard), a
//     small process that kills every registered group when the worker is
//     gone, so that what the command started (a shell's children) dies too.
//
// release must be called once the command has been waited for and its
// group killed.
func startCommand(cmd *exec.Cmd) (release func(), err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := starter.start(cmd); err != nil {
		return nil, err
	}
	pgid := cmd.Process.Pid
	theGuard.add(pgid)
	return func() {
		theGuard.remove(pgid)
		starter.release()
	}, nil
}

// starter is the goroutine, locked to its OS thread, that starts every
// exec command of the process.
var starter startThread

// startThread starts commands from one locked OS thread. The thread's
// goroutine ends (and the runtime ends the thread, as it stays locked)
// once no command it started is running and none is waiting to start;
// the next command gets a new one.
type startThread struct {
	mu   sync.Mutex
	live int // commands started or starting whose release has not come
	reqs chan startRequest
}

type startRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// start starts cmd on the thread; after a nil error, release must follow.
func (s *startThread) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	if s.reqs == nil {
		s.reqs = make(chan startRequest)
		go startLoop(s.reqs)
	}
	s.live++
	reqs := s.reqs
	s.mu.Unlock()
	done := make(chan error, 1)
	reqs <- startRequest{cmd: cmd, done: done}
	err := <-done
	if err != nil {
		s.release()
	}
	return err
}

// release says a command started on the thread has been waited for.
func (s *startThread) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live--; s.live == 0 {
		close(s.reqs)
		s.reqs = nil
	}
}

// startLoop starts the commands of reqs until it is closed. It never
// unlocks its thread: the runtime ends the thread with the goroutine, and
// no other goroutine ever runs on it (nor could end it under a child).
func startLoop(reqs chan startRequest) {
	runtime.LockOSThread()
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}
