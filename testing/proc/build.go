package proc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Bins are the paths of the built binaries.
type Bins struct {
	Chubbyd  string
	Chubbysh string
}

var build struct {
	once sync.Once
	dir  string
	bins Bins
	err  error
}

// CHUBBY_PROC_SRC=DIR makes Build compile the binaries from the checkout
// in DIR instead of this module: to replay process tests against an older
// build (the hostile-client suite against the build before its fixes).

// RaceBinaries reports whether Build compiles the binaries with the race
// detector: when CHUBBY_E2E_RACE=1. A server that reports a data race then
// fails the test that ran it.
func RaceBinaries() bool { return os.Getenv("CHUBBY_E2E_RACE") == "1" }

// Build compiles chubbyd and chubbysh into a temporary directory, once per
// test binary, and returns their paths. A build failure fails t.
func Build(t testing.TB) Bins {
	t.Helper()
	build.once.Do(func() {
		build.bins, build.err = buildBinaries()
	})
	if build.err != nil {
		t.Fatalf("proc: build binaries: %v", build.err)
	}
	return build.bins
}

func buildBinaries() (Bins, error) {
	dir, err := os.MkdirTemp("", "chubby-proc-bin-")
	if err != nil {
		return Bins{}, err
	}
	build.dir = dir
	if err := BuildCommands(dir, "./cmd/chubbyd", "./cmd/chubbysh"); err != nil {
		return Bins{}, err
	}
	return Bins{Chubbyd: filepath.Join(dir, "chubbyd"), Chubbysh: filepath.Join(dir, "chubbysh")}, nil
}

// BuildCommands compiles the module's commands pkgs (paths from the module
// root, such as "./cmd/chubbyd") into dir, with the race detector if
// RaceBinaries. It is Build for programs that are not tests; the caller
// owns dir.
func BuildCommands(dir string, pkgs ...string) error {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("no go command in PATH: %w", err)
	}
	root, err := moduleRoot(gocmd)
	if err != nil {
		return err
	}
	if src := os.Getenv("CHUBBY_PROC_SRC"); src != "" {
		root = src // replay the tests against another checkout's binaries
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if RaceBinaries() {
		args = append(args, "-race")
	}
	args = append(args, pkgs...)
	cmd := exec.Command(gocmd, args...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), root, err, out.String())
	}
	return nil
}

// moduleRoot is the directory of the go.mod of the module under test.
func moduleRoot(gocmd string) (string, error) {
	out, err := exec.Command(gocmd, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a module (go env GOMOD = %q)", gomod)
	}
	return filepath.Dir(gomod), nil
}

// Main runs the tests and then removes the binaries' directory. Call it from
// TestMain: os.Exit(proc.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	return code
}
