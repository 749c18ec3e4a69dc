package catalog

import (
	"os"

	"golang.org/x/sys/unix"
)

// unread reports whether the pipe f reads from holds bytes not read yet
// (TIOCINQ, alias FIONREAD). SyscallConn, unlike Fd, leaves f non-blocking, so a reader
// blocked on it can still be woken by Close.
func unread(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if err := rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
		return false
	}
	return n > 0
}
