package mcpback_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/testbin"
)

// serverBin is the stdio MCP server the tests run (internal/mcptest).
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toolpool-mcpback-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := testbin.Build(dir, "./internal/worker/mcpback/internal/mcptest/cmd/mcptestserver"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "mcptestserver")
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(
			// HTTP clients' idle connections and the NATS server's
			// background work wind down on their own schedule.
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).Start.func1"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
