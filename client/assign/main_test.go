package assign_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/leak"
)

// TestMain fails the package if a test leaves a goroutine behind: a
// member's loops, acquisitions, callbacks and timers all end with it.
func TestMain(m *testing.M) {
	code := m.Run()
	cell.StopExamples() // the runnable examples' cell
	if code == 0 {
		if err := leak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
