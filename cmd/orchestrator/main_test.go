package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/proctest"
)

// TestMain fails the package when a goroutine outlives the tests: the
// tests here assemble whole pools (embedded server, workers, dispatcher,
// HTTP server), and each must stop everything it started. Its tests
// mostly wait on child processes and servers: 4 run at once.
func TestMain(m *testing.M) {
	proctest.ParallelAtLeast(4)
	goleak.VerifyTestMain(m)
}
