package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/testbin"
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
	root, err := testbin.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	if err := testbin.Build(dir, testbin.NATSServer, "./cmd/worker"); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	natsServerBin = filepath.Join(dir, "nats-server")
	workerBin = filepath.Join(dir, "worker")
	configDir = filepath.Join(root, "jetstream", "server")
	if code := m.Run(); code != 0 {
		return code
	}
	// The tests drive real processes; what they start in this process
	// (connections, watchers) must be stopped by the time they end.
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster: goroutines leaked:", err)
		return 1
	}
	return 0
}
