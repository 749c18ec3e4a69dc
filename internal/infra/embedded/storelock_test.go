package embedded_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/infra/embedded"
)

// TestEmbeddedLocksDataDir: a second embedded server on a data directory in
// use refuses to start, naming the directory and the holder; once the first
// shuts down, the directory can be used again.
func TestEmbeddedLocksDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := embedded.Options{Listen: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
	first, err := embedded.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Shutdown()

	second, err := embedded.Start(opts)
	if err == nil {
		second.Shutdown()
		t.Fatal("a second embedded server started on a data dir in use")
	}
	if !errors.Is(err, embedded.ErrDataDirInUse) {
		t.Errorf("error %v; want one matching ErrDataDirInUse", err)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("error %q; want it to name %s and the holder's pid", msg, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, embedded.StoreLockFile)); err != nil {
		t.Errorf("lock file: %v", err)
	}

	first.Shutdown()
	again, err := embedded.Start(opts)
	if err != nil {
		t.Fatalf("after the first server's shutdown: %v", err)
	}
	again.Shutdown()
}
