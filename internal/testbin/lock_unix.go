//go:build unix

package testbin

import (
	"errors"
	"os"
	"syscall"
)

// LockFile takes an exclusive lock on the file at path (created if
// missing), waiting for it; unlock releases it. Test binaries that go
// test runs at once use it to build or install one at a time. The kernel releases it
// too when the process dies, so a killed test binary leaves nothing held.
func LockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
