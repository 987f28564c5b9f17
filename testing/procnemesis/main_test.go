package procnemesis

import (
	"os"
	"testing"

	"github.com/chubby-dev/chubby/testing/proc"
)

// TestMain runs a lock-client worker instead of the tests when the test
// binary was started as one (WorkerEnv); otherwise it runs the tests with
// the chubbyd binaries built once.
func TestMain(m *testing.M) {
	RunWorkerIfAsked()
	os.Exit(proc.Main(m))
}
