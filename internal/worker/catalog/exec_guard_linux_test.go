package catalog

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
)

// sleepGroup starts a process group of a shell and its background child,
// both sleeping, and returns the group's id; the test's end kills it.
func sleepGroup(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 300 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL); <-waited })
	return pgid
}

// groupRunning reports whether a process of group pgid runs (a zombie
// waiting for its reaper has ended).
func groupRunning(t *testing.T, pgid int) bool {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(data)
		// pid (comm) state ppid pgrp ...
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 2 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" && fields[0] != "X" {
			return true
		}
	}
	return false
}

// The guard kills the groups still registered when its input ends, and
// leaves those unregistered alone; lines it cannot read are skipped.
func TestGuardLoop(t *testing.T) {
	kept, killed := sleepGroup(t), sleepGroup(t)
	in := fmt.Sprintf("+%d\n+%d\n-%d\nnonsense\n+1\n+\n", kept, killed, kept)
	guardLoop(strings.NewReader(in))
	natstest.Eventually(t, 10*time.Second, "the registered group killed", func() bool {
		return !groupRunning(t, killed)
	})
	if !groupRunning(t, kept) {
		t.Error("an unregistered group was killed")
	}
}

// A command started with Pdeathsig outlives the end of other threads of
// the worker: Linux sends the signal when the thread that started the
// child ends, and threads end whenever a goroutine exits locked to one.
// The commands are started from a thread of their own, so the sleep below
// still runs after many threads ended; and the starting thread ends once
// no command it started is left (goleak checks that it does).
func TestStartedCommandOutlivesThreadExits(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	release, err := startCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		release()
	}()
	for range 64 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		}()
		<-done
	}
	time.Sleep(200 * time.Millisecond) // a signal sent would be delivered by now
	select {
	case <-waited:
		t.Fatalf("the command died when other threads ended: %v", cmd.ProcessState)
	default:
	}
}
