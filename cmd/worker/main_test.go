package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/proctest"
)

// TestMain fails the package when a goroutine outlives the tests: the
// tests here assemble whole pools (embedded server, workers, dispatcher,
// HTTP server), and each must stop everything it started.
func TestMain(m *testing.M) {
	proctest.ParallelAtLeast(4) // the tests mostly wait on worker processes
	goleak.VerifyTestMain(m)
}
