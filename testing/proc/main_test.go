package proc

import (
	"os"
	"testing"
)

// TestMain removes the binaries the tests built when they end.
func TestMain(m *testing.M) { os.Exit(Main(m)) }
