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

// startCommand starts cmd. Process groups are a Unix feature: here only
// the command itself is stopped at the timeout.
func startCommand(cmd *exec.Cmd) (release func(), err error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {}, nil
}

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
