package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/testbin"
)

// Paths of the binaries TestMain builds.
var (
	orchestratorBin string
	workerBin       string
	natsServerBin   string // for the stacks of separate processes (policy_harness_test.go)
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toolpool-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// The tests mostly wait on child processes, servers and timers (about
	// a third of a core on average at 2 at a time): 4 run at once.
	proctest.ParallelAtLeast(4)
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: goroutines leaked:", err)
		return 1
	}
	return 0
}

// buildBinaries builds cmd/orchestrator, cmd/worker and the pinned
// nats-server into dir with one go build (the packages share most of their
// dependencies).
func buildBinaries(dir string) error {
	if err := testbin.Build(dir, "./cmd/orchestrator", "./cmd/worker", testbin.NATSServer); err != nil {
		return err
	}
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	orchestratorBin = filepath.Join(dir, "orchestrator"+exe)
	workerBin = filepath.Join(dir, "worker"+exe)
	natsServerBin = filepath.Join(dir, "nats-server"+exe)
	return nil
}
