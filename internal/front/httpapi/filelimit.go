package httpapi

// DefaultMaxConns is ServerConfig.MaxConns by default: three quarters of
// the process's open-file limit (the soft limit, raised to the hard one
// first), less ProbeConns, at most MaxConnsDefault, at least 64. The
// quarter left is for the rest of the process: its NATS connections, the
// files it writes, the MCP sessions' streams on their connections. limit
// is the open-file limit it read (0 where the system has none to read:
// MaxConnsDefault then).
//
// Go already raises the soft limit to the hard one when a process starts
// on Linux and the BSDs; DefaultMaxConns asks again, for the systems and
// embedders where it did not happen.
func DefaultMaxConns() (n int, limit uint64) {
	limit, _ = fileLimit()
	return maxConnsFor(limit), limit
}

// maxConnsFor is DefaultMaxConns for an open-file limit.
func maxConnsFor(limit uint64) int {
	if limit == 0 {
		return MaxConnsDefault
	}
	n := int64(min(limit, 1<<30)*3/4) - ProbeConns
	return int(max(64, min(n, MaxConnsDefault)))
}
