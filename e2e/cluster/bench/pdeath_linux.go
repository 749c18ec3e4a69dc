package main

import "syscall"

// dieWithParent makes a child process receive SIGKILL when this one ends,
// however it ends: no server or worker outlives the bench.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
