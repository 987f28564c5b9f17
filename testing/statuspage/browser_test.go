package statuspage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

func TestMain(m *testing.M) { os.Exit(proc.Main(m)) }

const root = "/ls/local"

// screenshotDir is where the test keeps its screenshots: the repository's
// docs/ (the README shows them) when CHUBBY_UPDATE_SCREENSHOTS=1, so that
// a plain `go test ./...` leaves the tree as it was; a temporary directory
// otherwise.
func screenshotDir(t *testing.T) string {
	if os.Getenv("CHUBBY_UPDATE_SCREENSHOTS") == "1" {
		return filepath.Join("..", "..", "docs")
	}
	return t.TempDir()
}

// findChromium returns the browser to drive, or skips the test — or fails
// it when CHUBBY_REQUIRE_BROWSER is set (CI), so the check cannot vanish
// silently.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHUBBY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CHUBBY_REQUIRE_BROWSER") != "" {
		t.Fatal("CHUBBY_REQUIRE_BROWSER is set but no chromium, chromium-browser, google-chrome or headless-shell is on PATH (Debian: apt-get install chromium)")
	}
	t.Skip("no Chromium on PATH (Debian: apt-get install chromium); set CHUBBY_REQUIRE_BROWSER=1 to make this a failure")
	return ""
}

// browser starts a headless Chromium for the test and returns a context of
// one tab in it, cancelled (browser stopped) at cleanup.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	// Not t.TempDir: the browser's helper processes may still write in
	// their profile for a moment after it stopped, and t.TempDir's removal
	// would fail the test for it.
	profile, err := os.MkdirTemp("", "chubby-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the sandbox refuses to run as root (CI containers)
		chromedp.DisableGPU,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		wait.Until(5*time.Second, func() bool { return os.RemoveAll(profile) == nil })
	})
	if err := chromedp.Do(ctx); err != nil { // start the browser now
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// within runs steps with a deadline, failing the test with what it was
// doing if they fail.
func within(t *testing.T, ctx context.Context, d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text is the visible text of the first element sel matches. It is read
// in one JavaScript evaluation: the page replaces its content every two
// seconds, and a node looked up in one call may be gone by the next.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s := eval[*string](t, ctx, fmt.Sprintf(`(function () { var e = document.querySelector(%q); return e ? e.innerText : null; })()`, sel))
	if s == nil {
		t.Fatalf("nothing on the page matches %s", sel)
	}
	return strings.TrimSpace(*s)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition in the page until it holds: the page
// refreshes itself every two seconds, so what the cell does shows up
// without a reload.
func waitFor(t *testing.T, ctx context.Context, timeout time.Duration, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		t.Fatalf("the page never showed %s (%s): %v", what, cond, err)
	}
}

// textIs is a JavaScript condition: the element with id has exactly want
// as its text.
func textIs(id, want string) string {
	return fmt.Sprintf(`(document.getElementById(%q) || {}).textContent === %q`, id, want)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := screenshotDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// poll reports whether a JavaScript condition comes to hold in the page
// within timeout (checked every 100 ms).
func poll(ctx context.Context, timeout time.Duration, cond string) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	return err == nil
}

// masterIs is a JavaScript condition: the page names name as the master.
func masterIs(name string, self bool) string {
	const cond = `(document.getElementById('master') || {}).innerText`
	if self {
		return fmt.Sprintf(`(%s || '').indexOf(%q) === 0 && %s.indexOf('this server') > 0`, cond, name, cond)
	}
	return fmt.Sprintf(`(%s || '').trim() === %q`, cond, name)
}

// healthIs is a JavaScript condition: server name's row shows health.
func healthIs(name, health string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-member=%q]') || {dataset: {}}).dataset.health === %q`, name, health)
}

// openMasterPage opens the page of the cell's master and returns the
// master once its page names it. A loaded machine (Chromium starting, the
// other tests of the run) can make raft leadership move now and then, so
// the master is looked up again if its page stops naming it.
func openMasterPage(t *testing.T, tab context.Context, c *proc.Cell) *proc.Server {
	t.Helper()
	for range 5 {
		m := c.Master(t)
		within(t, tab, 20*time.Second, "open the page of "+m.NodeID,
			chromedp.Navigate("http://"+m.HTTPAddr+"/"), chromedp.WaitVisible(chromedp.CSS("#members")))
		if poll(tab, 5*time.Second, masterIs(m.NodeID, true)) {
			return m
		}
		t.Logf("%s's page does not name it the master any more; looking for the master again", m.NodeID)
	}
	t.Fatal("the cell's master kept changing; no page named it")
	return nil
}

// onMasterPage opens the master's page and waits until cond(master) holds
// in it; if it does not within timeout and the master changed meanwhile,
// it tries again on the new master's page. It returns the master.
func onMasterPage(t *testing.T, tab context.Context, c *proc.Cell, timeout time.Duration, what string, cond func(master *proc.Server) string) *proc.Server {
	t.Helper()
	for range 3 {
		m := openMasterPage(t, tab, c)
		if poll(tab, timeout, cond(m)) {
			return m
		}
		if c.Master(t) == m {
			t.Fatalf("%s's page never showed %s (%s)", m.NodeID, what, cond(m))
		}
		t.Logf("the master moved from %s while waiting for its page to show %s; again on the new master's page", m.NodeID, what)
	}
	t.Fatalf("the master kept moving; no master's page showed %s", what)
	return nil
}

// TestStatusPageInBrowser (issue 15): a person opens the status page of a
// three-server cell in which one session holds two locks and two others
// wait for one of them. The master's page names it, counts three sessions,
// two locks held and two waiters, lists the contended lock with its holder
// and both waiters (and only that lock), and the lock's node page shows the
// same. A follower's page names the master and links to its page. Then a
// follower is SIGKILLed: without a reload, the page shows it down within a
// few refreshes, and the master and the other follower up. On a
// phone-sized screen nothing scrolls sideways. Screenshots of both go to
// docs/.
func TestStatusPageInBrowser(t *testing.T) {
	chrome := findChromium(t)
	// The browser first: its start keeps both cores of a small machine busy
	// for a moment, which a cell's raft heartbeats need not sit through.
	tab := browser(t, chrome)
	c := proc.StartCell(t, 3, proc.CellOptions{LogLevel: "info"})

	dial := func() *client.Client {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cl, err := client.Dial(ctx, client.Config{Servers: c.AddrList()})
		if err != nil {
			t.Fatalf("dial the cell: %v", err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	ctx := context.Background()
	busy, calm := root+"/busy", root+"/calm"
	holder := dial()
	for _, p := range []string{busy, calm} {
		h, err := holder.Open(ctx, p, client.Create())
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Acquire(ctx, client.Exclusive); err != nil {
			t.Fatalf("acquire %s: %v", p, err)
		}
	}
	// Two waiters queue on busy. Their Acquires end when the test does
	// (cancelled before the clients close).
	waitCtx, stopWaiting := context.WithCancel(ctx)
	var waiterIDs []uint64
	done := make(chan error, 2)
	for range 2 {
		w := dial()
		h, err := w.Open(ctx, busy)
		if err != nil {
			t.Fatal(err)
		}
		waiterIDs = append(waiterIDs, w.Session().ID)
		go func() { done <- h.Acquire(waitCtx, client.Exclusive) }()
	}
	t.Cleanup(func() {
		stopWaiting()
		for range 2 {
			if err := <-done; err == nil || !errors.Is(err, context.Canceled) {
				t.Errorf("a waiter's Acquire ended with %v, want it cancelled (it was never to be granted)", err)
			}
		}
	})

	// The counts, once both waits are queued (the page refreshes itself),
	// every server up, the master the leader.
	master := onMasterPage(t, tab, c, 20*time.Second, "two waiters, three sessions, every server up, itself the leader", func(m *proc.Server) string {
		return strings.Join([]string{textIs("lock-waiters", "2"), textIs("sessions-count", "3"),
			healthIs("n1", "up"), healthIs("n2", "up"), healthIs("n3", "up"),
			fmt.Sprintf(`document.querySelector('tr[data-member=%q] .role').innerText.trim() === 'leader'`, m.NodeID)}, " && ")
	})
	if got := text(t, tab, "#locks-held"); got != "2" {
		t.Errorf("locks held: the page says %q, want 2", got)
	}
	if got := text(t, tab, "#epoch"); got == "" || got == "0" {
		t.Errorf("epoch: the page says %q", got)
	}

	// The contended lock: busy with its holder and both waiters; calm,
	// held without waiters, is not contended.
	row := text(t, tab, fmt.Sprintf(`#contended tr.lock[data-path=%q]`, busy))
	if n := text(t, tab, fmt.Sprintf(`#contended tr.lock[data-path=%q] .nwaiters`, busy)); n != "2" {
		t.Errorf("contended %s: %s waiters shown, want 2; row: %q", busy, n, row)
	}
	for _, want := range []string{"exclusive", fmt.Sprintf("session %d", holder.Session().ID),
		fmt.Sprintf("session %d", waiterIDs[0]), fmt.Sprintf("session %d", waiterIDs[1])} {
		if !strings.Contains(row, want) {
			t.Errorf("contended %s: row %q does not show %q", busy, row, want)
		}
	}
	if n := eval[int](t, tab, `document.querySelectorAll('#contended tr.lock').length`); n != 1 {
		t.Errorf("%d contended locks listed, want 1 (%s)", n, busy)
	}

	// The lock's own page.
	within(t, tab, 20*time.Second, "open the node page of "+busy,
		chromedp.Navigate("http://"+master.HTTPAddr+busy), chromedp.WaitVisible(chromedp.CSS("#node-lock")))
	nodeLock := text(t, tab, "#node-lock")
	for _, want := range []string{fmt.Sprintf("session %d", holder.Session().ID), fmt.Sprintf("session %d", waiterIDs[0]), fmt.Sprintf("session %d", waiterIDs[1])} {
		if !strings.Contains(nodeLock, want) {
			t.Errorf("node page of %s: lock section %q does not show %q", busy, nodeLock, want)
		}
	}

	// A follower's page names the master and links to its page.
	master = c.Master(t)
	follower := c.Others(master)[1]
	within(t, tab, 20*time.Second, "open "+follower.NodeID+"'s page",
		chromedp.Navigate("http://"+follower.HTTPAddr+"/"), chromedp.WaitVisible(chromedp.CSS("#master")))
	waitFor(t, tab, 10*time.Second, follower.NodeID+"'s page naming master "+master.NodeID, masterIs(master.NodeID, false))
	if href := eval[string](t, tab, `(document.querySelector('#master a') || {}).href || ''`); href != "http://"+master.HTTPAddr+"/" {
		t.Errorf("follower %s's page links the master to %q, want http://%s/", follower.NodeID, href, master.HTTPAddr)
	}

	// A follower dies; the master's page, left open, shows it down.
	master = openMasterPage(t, tab, c)
	dead := c.Others(master)[0]
	dead.Kill(t)
	waitFor(t, tab, 15*time.Second, dead.NodeID+" down", healthIs(dead.NodeID, "down"))
	t.Logf("%s's row: %q", dead.NodeID, text(t, tab, fmt.Sprintf(`tr[data-member=%q]`, dead.NodeID)))
	// The master and the other follower are up, on the master's page (if
	// the load moved leadership meanwhile, on the new master's).
	onMasterPage(t, tab, c, 15*time.Second, dead.NodeID+" down and the others up", func(*proc.Server) string {
		var cond []string
		for _, s := range c.Servers() {
			if s == dead {
				cond = append(cond, healthIs(s.NodeID, "down"))
			} else {
				cond = append(cond, healthIs(s.NodeID, "up"))
			}
		}
		return strings.Join(cond, " && ")
	})
	screenshot(t, tab, "status-page.png")

	// A phone: 390 CSS pixels wide; the page must not scroll sideways.
	within(t, tab, 20*time.Second, "phone viewport",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#members")))
	if w := eval[[]int](t, tab, `[document.documentElement.scrollWidth, window.innerWidth]`); len(w) != 2 || w[0] > w[1] {
		t.Errorf("on a 390 px wide screen the page is %v px wide (scrollWidth, innerWidth): it scrolls sideways", w)
	}
	screenshot(t, tab, "status-page-phone.png")
}
