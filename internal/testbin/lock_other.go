//go:build !unix

package testbin

import "errors"

// LockFile has no implementation on this system: without it Build builds
// into each caller's directory, and testdeps installs nothing (it names
// the command that does).
func LockFile(string) (unlock func(), err error) {
	return nil, errors.New("no file lock on this system")
}
