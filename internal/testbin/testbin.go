// Package testbin builds the binaries that real-process tests run: the
// project's commands and the pinned nats-server, with one go build from the
// module root, so packages that share dependencies are compiled once.
//
//	func TestMain(m *testing.M) {
//		dir, err := os.MkdirTemp("", "toolpool-x-bin-")
//		...
//		if err := testbin.Build(dir, "./cmd/worker", testbin.NATSServer); err != nil { ... }
//		workerBin = filepath.Join(dir, "worker")
//	}
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// NATSServer is the package path of the nats-server pinned in go.mod.
const NATSServer = "github.com/nats-io/nats-server/v2"

// ModuleRoot is the directory holding go.mod, above the working directory
// (a test's is its package directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build builds pkgs (paths relative to the module root, or NATSServer) into
// dir with one go build, without the race detector: the processes run as
// fast as in production. A failed build's error holds the compiler's
// output.
func Build(dir string, pkgs ...string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}
