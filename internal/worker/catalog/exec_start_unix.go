//go:build unix && !linux

package catalog

import (
	"os/exec"
	"syscall"
)

// startCommand starts cmd as the leader of a new process group, so that
// it and everything it starts can be signalled together. Here (not Linux)
// nothing kills the group when the worker process itself is killed.
func startCommand(cmd *exec.Cmd) (release func(), err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {}, nil
}
