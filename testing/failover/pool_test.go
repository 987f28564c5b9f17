package failover_test

import (
	"testing"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestPooledSessionsSurviveFailover: 30 sessions sharing connections
// through one client.Pool (renewed by KeepAliveMany) all survive a crash
// of the master: none expires, a lock held through it keeps its
// generation, and a session that cached a file before the crash reads the
// value written after it (the new master waited for the shared
// connections' sessions to come back before the write could commit).
func TestPooledSessionsSurviveFailover(t *testing.T) {
	c := cell.StartCluster(t, 3)
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() }) // after the clients
	const n = 30
	cls := make([]*client.Client, n)
	for i := range cls {
		cls[i] = c.Dial(t, client.Config{Pool: pool})
	}
	holder, cacher, writer := cls[0], cls[1], cls[2]
	lock := open(t, holder, c.Path("lock"), client.Create())
	if err := lock.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	seq, err := lock.Sequencer()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := c.Path("cfg")
	if _, err := writer.WriteFile(ctxT(t), cfgPath, []byte("before")); err != nil {
		t.Fatal(err)
	}
	cached := open(t, cacher, cfgPath)
	if got := contents(t, cached); got != "before" {
		t.Fatalf("cacher reads %q, want before", got)
	}

	old := c.Master(t)
	c.Kill(t, old)
	c.WaitMaster(t, others(c, old))
	if _, err := writer.WriteFile(ctxT(t), cfgPath, []byte("after")); err != nil {
		t.Fatalf("write after the failover: %v", err)
	}
	if got := contents(t, cached); got != "after" {
		t.Fatalf("cacher reads %q after the failover's write returned, want after", got)
	}
	if !checkSeq(t, writer, seq) {
		t.Fatalf("the holder's sequencer %s is not valid after the failover", seq)
	}
	// Every session renews on the new master: each one's local lease ends
	// later than it did at the failover's end.
	ends := make([]client.SessionInfo, n)
	for i, cl := range cls {
		ends[i] = cl.Session()
	}
	wait.For(t, 0, "every pooled session renewed by the new master", func() bool {
		for i, cl := range cls {
			if s := cl.Session(); s.State != client.SessionSafe || !s.LeaseEnd.After(ends[i].LeaseEnd) {
				return false
			}
		}
		return true
	})
	for i, cl := range cls {
		select {
		case <-cl.Done():
			t.Fatalf("client %d's session ended", i)
		default:
		}
	}
}
