package host_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: every
// component's Stop must end what its Start began.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
