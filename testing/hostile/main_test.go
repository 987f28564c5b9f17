package hostile

import (
	"os"
	"testing"

	"github.com/chubby-dev/chubby/testing/proc"
)

// TestMain runs the tests one at a time (no t.Parallel: each asserts a
// latency or memory bound that another test's load would disturb) with the
// binaries built once.
func TestMain(m *testing.M) { os.Exit(proc.Main(m)) }
