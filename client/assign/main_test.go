package assign_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a
// member's loops, acquisitions, callbacks and timers all end with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
