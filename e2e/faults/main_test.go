package faults_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Paths of the binaries TestMain builds.
var (
	natsServerBin   string
	orchestratorBin string
	workerBin       string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toolpool-faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	// One build, without -race (the processes should be as fast as in
	// production): the pinned nats-server and both binaries share
	// dependencies.
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/nats-io/nats-server/v2", "./cmd/orchestrator", "./cmd/worker")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: go build: %v\n%s", err, out)
		return 1
	}
	natsServerBin = filepath.Join(dir, "nats-server")
	orchestratorBin = filepath.Join(dir, "orchestrator")
	workerBin = filepath.Join(dir, "worker")
	code := m.Run()
	if t := summary.table(); t != "" {
		fmt.Println("fault suite:\n" + t)
	}
	return code
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

// summary collects every scenario's row for the table TestMain prints.
var summary reports

type reports struct {
	mu   sync.Mutex
	rows []string
}

func (r *reports) add(row string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row)
}

func (r *reports) table() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.rows) == 0 {
		return ""
	}
	return tableHeader + strings.Join(r.rows, "\n")
}
