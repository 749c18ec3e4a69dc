//go:build !unix

package catalog

import (
	"os"
	"os/exec"
	"syscall"
)

const (
	sigTerm = syscall.Signal(15)
	sigKill = syscall.Signal(9)
)

// setProcessGroup does nothing here: process groups are a Unix feature, so
// only the command itself is stopped at the timeout.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills the process pid on sigKill and ignores other signals.
func signalGroup(pid int, sig syscall.Signal) {
	if sig != sigKill || pid <= 0 {
		return
	}
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func exitSignal(*exec.ExitError) string { return "unknown signal" }
