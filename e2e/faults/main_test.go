package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolpool/toolpool/internal/proctest"
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
	dir, err := os.MkdirTemp("", "toolpool-faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := testbin.Build(dir, testbin.NATSServer, "./cmd/orchestrator", "./cmd/worker"); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	natsServerBin = filepath.Join(dir, "nats-server")
	orchestratorBin = filepath.Join(dir, "orchestrator")
	workerBin = filepath.Join(dir, "worker")
	code := m.Run()
	if t := summary.Table(tableHeader); t != "" {
		fmt.Println("fault suite:\n" + t)
	}
	return code
}

// summary collects every scenario's row for the table TestMain prints.
var summary proctest.Rows
