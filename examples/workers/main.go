// Command workers is N worker processes sharing M partitions through
// client/assign: each partition is owned by one worker at a time, proven by
// its lock's sequencer, and each owner does fenced work on its partitions —
// it increments the partition's counter file in the cell, a write the cell
// commits only while the sequencer is still valid.
//
//	workers -cell 127.0.0.1:7100 -name w1 -partitions 6
//
// Each change is one line on stdout:
//
//	owned 3 X:57:/ls/local/workers/items/3     partition 3 is ours, with this sequencer
//	revoked 3                                  taken away: work stopped, lock released
//	lost 3                                     the lock may be lost (jeopardy): stopped at once
//	step 3 41                                  (with -v) partition 3's counter is now 41
//
// Stop it with SIGINT or SIGTERM: it leaves the group, handing its
// partitions to the others at once. Killed (SIGKILL), its partitions move
// once its session has expired and their lock-delay has passed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/assign"
)

func main() {
	cellAddrs := flag.String("cell", envOr("CHUBBY_CELL", "127.0.0.1:7100"), "RPC addresses of the cell's servers, comma-separated")
	dir := flag.String("dir", "/ls/local/workers", "the group's directory")
	data := flag.String("data", "/ls/local/workers-data", "directory of the partitions' counter files")
	name := flag.String("name", "", "this worker's name in the group (default: from the session id)")
	m := flag.Int("partitions", 6, "number of partitions")
	ttl := flag.Duration("ttl", 0, "session TTL (0: the cell's default)")
	lockDelay := flag.Duration("lock-delay", 0, "lock-delay of the partition locks (0: the client's default, 15 s)")
	step := flag.Duration("step", 100*time.Millisecond, "pause between two steps of work on a partition")
	verbose := flag.Bool("v", false, "print every step")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("workers: ")
	if *m <= 0 {
		log.Fatalf("-partitions %d: want at least 1", *m)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := client.Dial(dctx, client.Config{Servers: strings.Split(*cellAddrs, ","), SessionTTL: *ttl, LockDelay: *lockDelay})
	cancel()
	if err != nil {
		log.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if h, err := c.Open(ctx, *data, client.CreateDir()); err != nil {
		log.Fatalf("data directory: %v", err)
	} else {
		h.Close()
	}

	w := &worker{c: c, data: *data, step: *step, verbose: *verbose, stops: map[int]chan struct{}{}}
	opts := []assign.Option{
		assign.OnAssigned(w.assigned),
		assign.OnRevoked(w.revoked),
		assign.OnLost(w.lost),
	}
	if *name != "" {
		opts = append(opts, assign.Name(*name))
	}
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	mb, err := assign.Join(jctx, c, *dir, *m, opts...)
	cancel()
	if err != nil {
		log.Fatalf("join: %v", err)
	}
	log.Printf("joined %s as %s (%d partitions)", *dir, mb.Name(), *m)
	select {
	case <-ctx.Done():
		lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := mb.Leave(lctx); err != nil {
			log.Printf("leave: %v", err)
		}
		w.wg.Wait()
		log.Printf("left")
	case <-mb.Done():
		w.wg.Wait()
		log.Fatalf("the member ended: %v", mb.Err())
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// worker does the work of the partitions it owns.
type worker struct {
	c       *client.Client
	data    string
	step    time.Duration
	verbose bool

	mu    sync.Mutex
	stops map[int]chan struct{}
	wg    sync.WaitGroup
	out   sync.Mutex
}

func (w *worker) say(format string, args ...any) {
	w.out.Lock()
	defer w.out.Unlock()
	fmt.Printf(format+"\n", args...)
}

func (w *worker) assigned(items []assign.Item) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		w.say("owned %d %s", it.N, it.Seq)
		stop := make(chan struct{})
		w.stops[it.N] = stop
		w.wg.Add(1)
		go w.work(it, stop)
	}
}

// revoked stops the partitions' work after the step under way.
func (w *worker) revoked(ctx context.Context, items []assign.Item) {
	w.stopAll(items)
	for _, it := range items {
		w.say("revoked %d", it.N)
	}
}

func (w *worker) lost(items []assign.Item) {
	w.stopAll(items)
	for _, it := range items {
		w.say("lost %d", it.N)
	}
}

func (w *worker) stopAll(items []assign.Item) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		if ch, ok := w.stops[it.N]; ok {
			close(ch)
			delete(w.stops, it.N)
		}
	}
}

// work increments partition it's counter, fenced by its sequencer, until
// the partition is revoked or its lock may be lost.
func (w *worker) work(it assign.Item, stop chan struct{}) {
	defer w.wg.Done()
	file := path.Join(w.data, strconv.Itoa(it.N))
	for {
		select {
		case <-stop:
			return
		case <-it.Ctx.Done():
			return
		case <-time.After(w.step):
		}
		ctx, cancel := context.WithTimeout(it.Ctx, 5*time.Second)
		n, err := w.increment(ctx, file, it.Seq)
		cancel()
		switch {
		case errors.Is(err, client.ErrBadSequencer):
			log.Printf("partition %d: the cell refused our sequencer %s: stopping", it.N, it.Seq)
			return
		case err != nil:
			log.Printf("partition %d: %v", it.N, err)
		case w.verbose:
			w.say("step %d %d", it.N, n)
		}
	}
}

// increment adds one to the counter file, in a write the cell commits only
// while seq is valid.
func (w *worker) increment(ctx context.Context, file string, seq client.Sequencer) (int, error) {
	n := 0
	h, err := w.c.Open(ctx, file)
	switch {
	case errors.Is(err, client.ErrNoSuchNode):
	case err != nil:
		return 0, err
	default:
		data, _, err := h.GetContentsAndStat(ctx)
		h.Close()
		if err != nil {
			return 0, err
		}
		if len(data) > 0 {
			if n, err = strconv.Atoi(string(data)); err != nil {
				return 0, fmt.Errorf("%s holds %q: %w", file, data, err)
			}
		}
	}
	n++
	if _, err := w.c.WriteFile(ctx, file, []byte(strconv.Itoa(n)), client.WithSequencer(seq)); err != nil {
		return 0, err
	}
	return n, nil
}
