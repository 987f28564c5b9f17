package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// get fetches a path of the cell's HTTP address.
func get(t *testing.T, c *cell.Cell, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + c.HTTPAddr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", path, resp.Status, err, b)
	}
	return string(b)
}

// section is the HTML of the page's section with id, "" if none.
func section(page, id string) string {
	i := strings.Index(page, `<section id="`+id+`"`)
	if i < 0 {
		return ""
	}
	end := strings.Index(page[i:], "</section>")
	if end < 0 {
		return page[i:]
	}
	return page[i : i+end]
}

func wantIn(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s does not show %q:\n%s", what, w, text)
		}
	}
}

// TestStatusPageAndLockMetrics follows one lock through a holder's expiry
// on the master's manual clock and checks what the status page and the
// metrics say at each step: the contended lock with its holder and its
// waiter waiting for as long as the clock moved; the expiry in the recent
// events and the lock-delay in force; a TryAcquire held back by the
// lock-delay counted; the waiter's wait, queued to granted, observed
// exactly in the lock wait histogram; a call of another epoch counted as
// denied. The node page shows the lock too.
func TestStatusPageAndLockMetrics(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock(), cell.WithHTTP())
	mc := c.Manual(t)
	ctx := context.Background()
	const ttl, delay = 12 * time.Second, 10 * time.Second
	lock := c.Path("lock")

	w := c.Dial(t, client.Config{SessionTTL: 60 * time.Second})
	obs := c.Dial(t, client.Config{SessionTTL: 60 * time.Second})
	v := c.NewRawSession(t, ttl) // never renews: its lease is [now, now+ttl)
	rawCall(t, v, wire.MOpen, wire.OpenArgs{Path: lock, Create: true}, nil)
	rawAcquire(t, v, lock, delay)
	got := queue(t, c, open(t, w, lock), ctx)
	hObs := open(t, obs, lock)

	mc.Advance(2 * time.Second)
	page := get(t, c, "/")
	wantIn(t, "the contended locks", section(page, "contended"), lock,
		fmt.Sprintf("session %d (lease left 10s)", v.Session), fmt.Sprintf("session %d, exclusive, waiting 2s", w.Session().ID))
	wantIn(t, "the lock counts", section(page, "locks"), `<dd id="locks-held">1</dd>`, `<dd id="lock-waiters">1</dd>`)
	wantIn(t, "the sessions", section(page, "sessions"), `<dd id="sessions-count">3</dd>`)
	wantIn(t, "the node page", section(get(t, c, lock), "node-lock"), fmt.Sprintf("session %d", v.Session), "waiting 2s")
	if n := metric(t, c, "chubby_lock_waiters"); n != 1 {
		t.Errorf("chubby_lock_waiters = %v, want 1", n)
	}
	if n := metric(t, c, `chubby_locks_held{mode="exclusive"}`); n != 1 {
		t.Errorf(`chubby_locks_held{mode="exclusive"} = %v, want 1`, n)
	}

	// Two thirds of the holder's TTL without a KeepAlive: late (its client
	// is likely in jeopardy), as the page and chubby_sessions_by_state say.
	mc.Advance(7 * time.Second)
	page = get(t, c, "/")
	wantIn(t, "the contended locks", section(page, "contended"), fmt.Sprintf("session %d (lease left 3s, late: last KeepAlive 9s ago)", v.Session))
	wantIn(t, "the sessions", section(page, "sessions"), `<dd id="sessions-late">1</dd>`, `<dd id="sessions-safe">2</dd>`)
	if n := metric(t, c, `chubby_sessions_by_state{state="late"}`); n != 1 {
		t.Errorf(`chubby_sessions_by_state{state="late"} = %v, want 1`, n)
	}

	// The holder's lease ends: expiry, lock-delay.
	mc.Advance(ttl - 9*time.Second)
	wait.For(t, 0, "the silent session to expire", func() bool { return c.Status().Sessions == 2 })
	barrier(t, c)
	page = get(t, c, "/")
	wantIn(t, "the recent events", section(page, "events"), fmt.Sprintf("session %d expired", v.Session))
	wantIn(t, "the lock-delays in force", section(page, "delays"), lock, "10s")
	wantErr(t, hObs.TryAcquire(ctxT(t), client.Exclusive), client.ErrLockDelay, "TryAcquire in the lock-delay")
	if n := metric(t, c, "chubby_lock_delay_blocks_total"); n != 1 {
		t.Errorf("chubby_lock_delay_blocks_total = %v after one TryAcquire held back, want 1", n)
	}
	if n := metric(t, c, "chubby_lock_delays_active"); n != 1 {
		t.Errorf("chubby_lock_delays_active = %v, want 1", n)
	}
	if n := metric(t, c, "chubby_sessions_expired_total"); n != 1 {
		t.Errorf("chubby_sessions_expired_total = %v, want 1", n)
	}

	// The lock-delay ends: the waiter, queued 2 + 10 + 10 s ago on the
	// master's clock, is granted.
	mc.Advance(delay)
	granted(t, got, "at the end of the lock-delay")
	if n := metric(t, c, "chubby_lock_wait_seconds_count"); n != 1 {
		t.Errorf("chubby_lock_wait_seconds_count = %v, want 1", n)
	}
	if s := metric(t, c, "chubby_lock_wait_seconds_sum"); s != (ttl + delay).Seconds() {
		t.Errorf("chubby_lock_wait_seconds_sum = %v, want %v (queued to granted on the master's clock)", s, (ttl + delay).Seconds())
	}
	if !strings.Contains(section(get(t, c, "/"), "contended"), "no lock has waiters") {
		t.Errorf("after the grant the page still lists a contended lock")
	}

	// A call stamped with another epoch is denied and counted.
	before := metric(t, c, `chubby_calls_denied_total{reason="wrong_epoch"}`)
	v2 := c.NewRawSession(t, ttl)
	v2.Epoch++
	wantErr(t, v2.Call(wire.MGetStat, wire.NodeArgs{Path: lock}, nil), wire.ErrWrongEpoch, "a call of another epoch")
	if n := metric(t, c, `chubby_calls_denied_total{reason="wrong_epoch"}`); n != before+1 {
		t.Errorf(`chubby_calls_denied_total{reason="wrong_epoch"} = %v, want %v`, n, before+1)
	}
	if n := metric(t, c, "chubby_master_serving"); n != 1 {
		t.Errorf("chubby_master_serving = %v on the master", n)
	}

	// A node that does not exist: the page says so.
	wantIn(t, "the page of a missing node", get(t, c, c.Path("nope")), fs.ErrNoSuchNode.Error())
}

// TestStatusPageWritesWaitingOnInvalidation: while a write waits for a
// silent cacher (it never acknowledges; its lease runs out on the master's
// manual clock), the page lists it with its path, how long it has waited
// and for how many sessions, and chubby_writes_waiting_invalidation is 1;
// once the cacher's lease ends the write goes through, the gauge is 0 and
// the wait is observed as exactly the cacher's remaining lease.
func TestStatusPageWritesWaitingOnInvalidation(t *testing.T) {
	const ttl = 3 * time.Second
	c := cell.Start(t, cell.WithManualClock(), cell.WithHTTP())
	mc := c.Manual(t)
	w := c.Dial(t, client.Config{})
	f := c.Path("f")
	if _, err := w.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	silent := c.NewRawSession(t, ttl) // never renews
	if rep := cacheRead(t, silent, f); !rep.Cacheable {
		t.Fatal("the silent session's read is not cacheable")
	}
	done := asyncWrite(w, f, "v2")
	wait.For(t, 0, "the write to wait for the silent cacher", func() bool {
		return metric(t, c, "chubby_writes_waiting_invalidation") == 1
	})
	mc.Advance(time.Second)
	writes := section(get(t, c, "/"), "writes")
	wantIn(t, "the writes section", writes, `<dd id="writes-waiting">1</dd>`, `<td class="path">`+f, "</td><td>1s</td><td>1</td>")

	mc.Advance(ttl - time.Second)
	wantReturned(t, done, "the write at the end of the silent cacher's lease")
	wait.For(t, 0, "no write waiting", func() bool { return metric(t, c, "chubby_writes_waiting_invalidation") == 0 })
	if n, sum := metric(t, c, "chubby_cache_invalidation_wait_seconds_count"), metric(t, c, "chubby_cache_invalidation_wait_seconds_sum"); n != 1 || sum != ttl.Seconds() {
		t.Errorf("chubby_cache_invalidation_wait_seconds: count %v sum %v, want one wait of %v", n, sum, ttl)
	}
	wantIn(t, "the writes section after the write", section(get(t, c, "/"), "writes"), `<dd id="writes-waiting">0</dd>`)
}
