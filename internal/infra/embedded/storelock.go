package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StoreLockFile is the file in Options.DataDir that an embedded
// server holds locked while it runs. It names the holder (process id, host
// and start time) for the error a second process gets.
const StoreLockFile = "toolpool.lock"

// ErrDataDirInUse matches (with errors.Is) the error Start returns
// when another process runs an embedded server on the same data directory.
// Two JetStream servers writing one store corrupt it, so the second one
// refuses to start.
var ErrDataDirInUse = errors.New("data directory is in use by another process")

// storeLock is a held lock on a data directory.
type storeLock struct{ f *os.File }

// lockStore creates dataDir if needed and locks its StoreLockFile for the
// life of the process (or until unlock). The lock is the kernel's: it is
// released when the process ends, however it ends, so a kill -9 leaves no
// stale lock behind.
func lockStore(dataDir string) (*storeLock, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("jetstream: embedded nats-server: data dir %s: %w", dataDir, err)
	}
	path := filepath.Join(dataDir, StoreLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("jetstream: embedded nats-server: lock file %s: %w", path, err)
	}
	locked, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("jetstream: embedded nats-server: lock %s: %w", path, err)
	}
	if !locked {
		holder, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "unknown process"
		}
		return nil, fmt.Errorf("jetstream: embedded nats-server: data dir %s is locked by %s: %w; "+
			"stop that orchestrator or give this one another --data-dir", dataDir, who, ErrDataDirInUse)
	}
	host, _ := os.Hostname()
	who := "pid " + strconv.Itoa(os.Getpid()) + " on " + host + " since " + time.Now().UTC().Format(time.RFC3339)
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(who+"\n"), 0) // informative only: the lock is what counts
	}
	return &storeLock{f: f}, nil
}

// unlock releases the lock. The file stays: removing it could race with a
// process that just opened it to lock it.
func (l *storeLock) unlock() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
