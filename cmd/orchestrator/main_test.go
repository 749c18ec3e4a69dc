package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: the
// tests here assemble whole pools (embedded server, workers, dispatcher,
// HTTP server), and each must stop everything it started.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "orchestrator: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}
