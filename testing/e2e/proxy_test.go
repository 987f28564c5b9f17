package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestProxyKilledClientsContinue (issue 12, acceptance 4's last point): a
// client of a three-server cell of chubbyd processes goes through one of
// two chubbyproxy processes; it holds a lock and caches a file. SIGKILL of
// its proxy: the client goes on through the other proxy with the same
// session, still holding the lock (another client's TryAcquire is
// refused, its sequencer is still valid), and reads a write made after the
// kill (its cache was not left serving the old value).
func TestProxyKilledClientsContinue(t *testing.T) {
	t.Parallel()
	c := proc.StartCell(t, 3, proc.CellOptions{})
	dir := t.TempDir()
	if err := proc.BuildCommands(dir, "./cmd/chubbyproxy"); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for range 2 {
		addr, err := proc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
	}
	proxies := map[string]*proc.Child{}
	for i, addr := range addrs {
		cmd := exec.Command(filepath.Join(dir, "chubbyproxy"), "-cell", c.Addrs(), "-listen", addr, "-peers", strings.Join(addrs, ","), "-log-level", "debug")
		proxies[addr] = proc.StartChild(t, fmt.Sprintf("chubbyproxy%d", i), cmd, nil)
	}
	for _, addr := range addrs {
		wait.For(t, 20*time.Second, "chubbyproxy at "+addr+" to listen", func() bool {
			nc, err := net.Dial("tcp", addr)
			if err == nil {
				nc.Close()
			}
			return err == nil
		})
	}
	dial := func(cfg client.Config) *client.Client {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cl, err := client.Dial(ctx, cfg)
		if err != nil {
			t.Fatalf("dial %v: %v", cfg.Servers, err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	cl := dial(client.Config{Servers: addrs, FixedServers: true})
	direct := dial(client.Config{Servers: c.AddrList()})

	lock, err := cl.Open(ctx(), root+"/proxied-lock", client.Create())
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Acquire(ctx(), client.Exclusive); err != nil {
		t.Fatalf("acquire through the proxy: %v", err)
	}
	seq, err := lock.Sequencer()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := root + "/proxied-cfg"
	if _, err := direct.WriteFile(ctx(), cfgPath, []byte("before")); err != nil {
		t.Fatal(err)
	}
	cached, err := cl.Open(ctx(), cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if data, _, err := cached.GetContentsAndStat(ctx()); err != nil || string(data) != "before" {
		t.Fatalf("read through the proxy: %q, %v", data, err)
	}

	before := cl.Session()
	used := proxies[before.Master]
	if used == nil {
		t.Fatalf("the client's master is %q, not one of the proxies %v", before.Master, addrs)
	}
	used.Kill()
	<-used.Done()

	if _, err := direct.WriteFile(ctx(), cfgPath, []byte("after")); err != nil {
		t.Fatalf("write after the proxy died: %v", err)
	}
	if data, _, err := cached.GetContentsAndStat(ctx()); err != nil || string(data) != "after" {
		t.Fatalf("read after the proxy died and a write returned: %q, %v; want after", data, err)
	}
	after := cl.Session()
	if after.ID != before.ID || after.State != client.SessionSafe || after.Master == before.Master {
		t.Fatalf("session after the kill %+v; before %+v: want the same session, safe, through the other proxy", after, before)
	}
	if ok, err := direct.CheckSequencer(ctx(), seq); err != nil || !ok {
		t.Fatalf("the lock's sequencer %s after the proxy died: valid %v, %v", seq, ok, err)
	}
	other, err := direct.Open(ctx(), root+"/proxied-lock")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.TryAcquire(ctx(), client.Exclusive); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("another client's TryAcquire after the proxy died: %v; want ErrLockHeld", err)
	}
	if err := lock.Release(ctx()); err != nil {
		t.Fatalf("release through the other proxy: %v", err)
	}
	select {
	case <-cl.Done():
		t.Fatal("the client's session ended")
	default:
	}
}
