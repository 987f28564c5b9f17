package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestWatch: `chubbysh watch` in one process prints, one JSON object per
// event, what changes made from other processes cause, in commit order
// (Chubby §2.6 events): child events for a directory, contents, lock and
// handle events for a file.
func TestWatch(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	dir, file := "/ls/local/app", "/ls/local/app/f"
	wantOK(t, s.Sh(t, "mkdir", dir))
	wantOK(t, s.Sh(t, "write", file, "v0"))

	dw := s.StartSh(t, "-json", "watch", dir, "-for", "30s")
	fw := s.StartSh(t, "-json", "watch", file, "-for", "30s")
	// Both watchers are subscribed once a change shows up in both; write
	// until it does (a write before the subscription is simply not seen).
	next := func(sh *proc.Shell) map[string]string {
		t.Helper()
		line := sh.NextLine(t, 15*time.Second)
		var ev map[string]string
		if err := json.Unmarshal([]byte(line.Text), &ev); err != nil {
			t.Fatalf("watch printed %q, not one JSON object: %v", line.Text, err)
		}
		return ev
	}
	want := func(sh *proc.Shell, event, path string) {
		t.Helper()
		if ev := next(sh); ev["event"] != event || ev["path"] != path {
			t.Fatalf("event %v, want %s on %s", ev, event, path)
		}
	}
	// The watchers are subscribed once a change shows up in both; write the
	// file until it does (a write before a subscription is not seen).
	wait.For(t, 15*time.Second, "both watches to print a probe write's event", func() bool {
		if dw.Pending() > 0 && fw.Pending() > 0 {
			return true
		}
		wantOK(t, s.Sh(t, "write", file, "probe"))
		return false
	})
	// Let the last probe's events arrive, then drain them.
	wantOK(t, s.Sh(t, "write", dir+"/marker", "x"))
	for {
		ev := next(dw)
		if ev["path"] == dir+"/marker" {
			break
		}
		if ev["event"] != "child_modified" || ev["path"] != file {
			t.Fatalf("unexpected event before the actions: %v", ev)
		}
	}
	// The file's marker: a lock_acquired after the probes' events.
	wantOK(t, s.Sh(t, "lock", file, "--", "true"))
	for {
		ev := next(fw)
		if ev["event"] == "lock_acquired" {
			break
		}
		if ev["event"] != "contents_modified" || ev["path"] != file {
			t.Fatalf("unexpected file event before the actions: %v", ev)
		}
	}
	// The directory saw no event from the lock; the marker drained it.

	wantOK(t, s.Sh(t, "write", file, "v1"))
	wantOK(t, s.Sh(t, "create", dir+"/g"))
	wantOK(t, s.Sh(t, "rm", dir+"/g"))
	wantOK(t, s.Sh(t, "lock", file, "--", "true"))
	wantOK(t, s.Sh(t, "rm", file))

	want(fw, "contents_modified", file)
	want(fw, "lock_acquired", file)
	want(fw, "handle_invalid", file)
	want(dw, "child_modified", file)
	want(dw, "child_added", dir+"/g")
	want(dw, "child_removed", dir+"/g")
	want(dw, "child_removed", file)
}
