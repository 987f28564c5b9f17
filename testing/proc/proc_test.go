package proc

import (
	"os"
	"os/exec"
	"testing"
)

func TestOneJSONObject(t *testing.T) {
	for _, tc := range []struct {
		out string
		ok  bool
	}{
		{"{\"a\":1}\n", true},
		{"{}\n", true},
		{"{\"a\":1}", false},              // no newline
		{"{\"a\":1}\n{\"b\":2}\n", false}, // two lines
		{"{\"a\":1}{\"b\":2}\n", false},   // two objects on one line
		{"[1]\n", false},
		{"null\n", false},
		{"\n", false},
		{"", false},
		{"{\"a\":\n1}\n", false},
	} {
		_, err := OneJSONObject(tc.out)
		if (err == nil) != tc.ok {
			t.Errorf("OneJSONObject(%q) error %v, want ok=%v", tc.out, err, tc.ok)
		}
	}
}

func TestProcessAlive(t *testing.T) {
	if !ProcessAlive(os.Getpid()) {
		t.Errorf("this process is not alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run true(1): %v", err)
	}
	if ProcessAlive(cmd.Process.Pid) {
		t.Errorf("a reaped process %d is alive", cmd.Process.Pid)
	}
}

func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		a, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("FreeAddr returned %s twice", a)
		}
		seen[a] = true
	}
}
