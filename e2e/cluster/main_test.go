package cluster_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Paths of the binaries TestMain builds.
var (
	natsServerBin string
	workerBin     string
	configDir     string // jetstream/server of this checkout
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toolpool-cluster-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	// One build: the pinned nats-server and the worker share dependencies.
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/nats-io/nats-server/v2", "./cmd/worker")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: go build: %v\n%s", err, out)
		return 1
	}
	natsServerBin = filepath.Join(dir, "nats-server")
	workerBin = filepath.Join(dir, "worker")
	configDir = filepath.Join(root, "jetstream", "server")
	return m.Run()
}

// moduleRoot is the directory holding go.mod above the working directory.
func moduleRoot() (string, error) {
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
