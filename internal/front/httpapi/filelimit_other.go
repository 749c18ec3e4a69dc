//go:build !unix

package httpapi

// fileLimit is 0: the system has no open-file limit to read.
func fileLimit() (limit uint64, raised bool) { return 0, false }
