package lb_test

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
	natsServerBin   string
	orchestratorBin string
	workerBin       string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toolpool-lb-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "lb:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := testbin.Build(dir, testbin.NATSServer, "./cmd/orchestrator", "./cmd/worker"); err != nil {
		fmt.Fprintln(os.Stderr, "lb:", err)
		return 1
	}
	natsServerBin = filepath.Join(dir, "nats-server")
	orchestratorBin = filepath.Join(dir, "orchestrator")
	workerBin = filepath.Join(dir, "worker")
	code := m.Run()
	if t := summary.Table(tableHeader); t != "" {
		fmt.Println("load-balancer suite:\n" + t)
	}
	if code != 0 {
		return code
	}
	// The tests drive real processes; what they start in this process
	// (connections, clients) must be stopped by the time they end.
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "lb: goroutines leaked:", err)
		return 1
	}
	return 0
}
