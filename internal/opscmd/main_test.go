package opscmd

import (
	"context"
	"io"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/cli"
)

// TestMain fails the package when a goroutine outlives the tests: the
// tests here assemble whole pools (embedded server, workers, dispatcher),
// and each must stop everything it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run runs the operators' commands as the orchestrator binary does: under
// a root named orchestrator. It returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cli.Command{Name: "orchestrator", Commands: []*cli.Command{DLQ(), Approvals(), Status(), Bench(), Budgets()}}
	return cli.Main(ctx, root, args, stdout, stderr)
}
