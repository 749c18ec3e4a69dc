//go:build !unix

package embedded

import "os"

// tryLock does not lock on systems without flock(2): there, keep one
// orchestrator per data directory yourself.
func tryLock(*os.File) (bool, error) { return true, nil }
