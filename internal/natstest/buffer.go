package natstest

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer safe for concurrent writers and readers:
// a log sink for a server's or a connection's goroutines, or the output of
// a process that a test reads while it runs. The zero value is ready.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
