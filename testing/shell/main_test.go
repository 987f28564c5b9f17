package shell

import (
	"os"
	"testing"

	"github.com/chubby-dev/chubby/testing/proc"
)

func TestMain(m *testing.M) {
	os.Exit(proc.Main(m))
}
