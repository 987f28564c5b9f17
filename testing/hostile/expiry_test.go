package hostile

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// expiredLine is the INFO summary of session expiries in chubbyd's log.
var expiredLine = regexp.MustCompile(`\[INFO\] +chubbyd[.a-z]*: sessions expired: count=([0-9]+)`)

// expiryMention is a log line whose message (the text before its
// key=value pairs) is about expiry.
var expiryMention = regexp.MustCompile(`(?mi)^\S+ \[[A-Z]+\] +[a-z.]+: [^=\n]*expir`)

// TestExpiryLogSummarised replays issue 17, finding 5 (every expired
// session was an INFO line: a flood of abandoned sessions flooded the log):
// thousands of sessions created and abandoned expire together, and
// chubbyd's log at INFO level says so in a few summary lines whose counts
// add up to them, not a line per session.
func TestExpiryLogSummarised(t *testing.T) {
	n := 20_000
	s := proc.StartServer(t, proc.Options{LogLevel: "info", ExtraArgs: []string{"-create-session-rate", "1000000"}})
	r := rawSession(t, s, time.Second)
	r.Close() // only for the epoch; its session expires with the rest
	raw := rawSession(t, s, time.Second)
	got, err := pipeline(raw, n, func(int) (wire.Request, any) {
		return stamp(raw, wire.MCreateSession), wire.CreateSessionArgs{TTL: int64(time.Second)}
	}, nil)
	if err != nil || got[""] != n {
		t.Fatalf("creating %d sessions: %v %v", n, got, err)
	}
	raw.Close()
	start := time.Now()
	wait.For(t, time.Minute, "every abandoned session to expire", wait.Every(200*time.Millisecond, func() bool {
		return s.Status(t)["sessions"] == 0.0
	}))
	expired := time.Since(start)
	want := n + 2 // and the two raw connections' own sessions
	total, lines := 0, 0
	wait.For(t, time.Minute, "summary lines counting every expiry", wait.Every(200*time.Millisecond, func() bool {
		total, lines = 0, 0
		for _, m := range expiredLine.FindAllStringSubmatch(s.Log(), -1) {
			c, _ := strconv.Atoi(m[1])
			total += c
			lines++
		}
		return total >= want
	}))
	if total != want || lines > 3 {
		t.Errorf("%d sessions expired; the log has %d summary lines counting %d, want a few counting %d", want, lines, total, want)
	}
	// Nothing else about expiry at INFO or above: no line per session.
	if n := len(expiryMention.FindAllString(s.Log(), -1)); n != lines {
		t.Errorf("the log mentions expiry in %d lines, %d of them summaries", n, lines)
	}
	t.Logf("%d sessions expired within %v; chubbyd's INFO log has %d summary line(s) counting %d expiries",
		want, expired.Round(time.Millisecond), lines, total)
}
