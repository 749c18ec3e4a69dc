//go:build unix

package natstest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// haveLocks says whether lockPort locks: it does where flock exists.
const haveLocks = true

// lockPort takes the lock of port, a flock on the file named after it in
// dir, without waiting. ok is false when another open file holds it (in
// practice another process's: this process asks only once per port).
// unlock releases it, and so does the kernel when the process dies. The
// files stay: removing one could let two processes lock two files of
// the same name, one of them gone.
func lockPort(dir string, port int) (unlock func(), ok bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, false, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return func() { _ = f.Close() }, true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		_ = f.Close()
		return nil, false, nil
	default:
		_ = f.Close()
		return nil, false, err
	}
}
