//go:build unix

package mcpback

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes a stdio server the leader of a process group of
// its own: a signal to the worker's terminal does not reach it (the worker
// stops it in order), and whatever it starts can be killed with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills what is left of the process group pgid; an empty group
// is not an error.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
