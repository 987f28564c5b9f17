// Command config-watcher shows config distribution through the cell: it
// prints a config file's contents at start and again each time they
// change, driven by the cell's events (no polling), and serves every read
// of the config from its session's cache, which the cell invalidates
// before any change commits. It stands for a program that reads its
// config on every request.
//
//	config-watcher -cell 127.0.0.1:7100 -file /ls/local/app/config
//	chubbysh write /ls/local/app/config 'replicas=5'     # elsewhere: the watcher prints it
//
// See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/client"
)

func main() {
	cell := flag.String("cell", "127.0.0.1:7100", "the cell's servers, comma-separated")
	file := flag.String("file", "/ls/local/app/config", "the config file (created empty if missing)")
	reads := flag.Duration("read-every", 10*time.Millisecond, "how often the program reads its config (from the cache)")
	flag.Parse()
	if err := run(*cell, *file, *reads); err != nil {
		fmt.Fprintln(os.Stderr, "config-watcher:", err)
		os.Exit(1)
	}
}

func run(cell, file string, every time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := client.Dial(ctx, client.Config{Servers: strings.Split(cell, ",")})
	if err != nil {
		return err
	}
	defer c.Close()
	// Wake on the file's changes (and on the session's own events: after
	// a master failover or jeopardy the cache was dropped, so read again).
	changed := make(chan struct{}, 1)
	cancel := c.Subscribe(func(ev client.Event) {
		if ev.Path == file || ev.Path == "" {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	defer cancel()
	h, err := c.Open(ctx, file, client.Create(), client.WithEvents(client.EventContentsModified))
	if err != nil {
		return err
	}
	defer h.Close()

	var shown []byte
	show := func() error {
		data, _, err := h.GetContentsAndStat(ctx) // from the cache when it is valid
		if err != nil {
			return err
		}
		if shown == nil || string(data) != string(shown) {
			fmt.Printf("config %s\n", data)
			shown = data
		}
		return nil
	}
	if err := show(); err != nil {
		return err
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			st := c.CacheStats()
			fmt.Printf("cache hits=%d misses=%d invalidations=%d\n", st.Hits, st.Misses, st.Invalidations)
			return nil
		case <-changed:
		case <-tick.C: // the program's own reads of its config
		}
		if err := show(); err != nil {
			if errors.Is(err, client.ErrSessionExpired) {
				return err
			}
			if errors.Is(err, client.ErrStaleHandle) { // deleted (and maybe made again): open the new one
				h.Close()
				if h, err = c.Open(ctx, file, client.Create(), client.WithEvents(client.EventContentsModified)); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintln(os.Stderr, "read:", err) // jeopardy, failover: keep the last config
		}
	}
}
