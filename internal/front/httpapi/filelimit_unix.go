//go:build unix

package httpapi

import "syscall"

// fileLimit is the process's open-file limit, the soft limit raised to
// the hard one first when it was lower (raised says it was).
func fileLimit() (limit uint64, raised bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
			return uint64(want.Cur), true
		}
	}
	return uint64(lim.Cur), false
}
