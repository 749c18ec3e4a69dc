//go:build unix

package builtin_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// TestReadFileFIFO: a named pipe is refused at once instead of blocking
// until a writer comes.
func TestReadFileFIFO(t *testing.T) {
	t.Parallel()
	b := setupFiles(t, builtin.FileConfig{})
	if err := syscall.Mkfifo(filepath.Join(b.root, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := b.call("read_file", `{"path": "pipe"}`)
	wantErr(t, "read_file", err, permanent, "", "not a regular file")
	_, err = b.call("write_file", `{"path": "pipe", "content": "x"}`)
	if err == nil {
		t.Error("write_file to a pipe succeeded")
	}
}
