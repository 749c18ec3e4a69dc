//go:build !unix

package testdeps

import "errors"

// lockFile has no implementation here: without a lock the tests do not
// install anything, and say which command does.
func lockFile(string) (unlock func(), err error) {
	return nil, errors.New("no file lock on this system")
}
