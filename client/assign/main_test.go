package assign_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/chubby-dev/chubby/testing/cell"
)

// The runnable examples share one cell, started by the first that needs it
// and stopped before the leak check.
var (
	exampleOnce sync.Once
	exampleAddr string
	exampleStop = func() {}
)

func exampleServers() []string {
	exampleOnce.Do(func() { exampleAddr, exampleStop = cell.ForExamples() })
	return []string{exampleAddr}
}

// TestMain fails the package if a test leaves a goroutine behind: a
// member's loops, acquisitions, callbacks and timers all end with it.
func TestMain(m *testing.M) {
	code := m.Run()
	exampleStop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
