// Command elected-writer shows leader election with fencing: writers
// campaign in an election (client/election); the leader appends to a store
// with its term's sequencer on every write; the store embeds client/fence's
// Guard and refuses a sequencer older than the newest it has seen, so a
// writer that lost its term without knowing — paused past its session's
// TTL, partitioned — cannot write once a newer leader has.
//
//	elected-writer store -listen 127.0.0.1:9000
//	elected-writer write -cell 127.0.0.1:7100 -dir /ls/local/writer -name A -store http://127.0.0.1:9000
//
// See README.md.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/election"
	"github.com/chubby-dev/chubby/client/fence"
	"github.com/chubby-dev/chubby/fs"
)

// SeqHeader carries a write's sequencer.
const SeqHeader = "X-Chubby-Sequencer"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "store":
		err = runStore(os.Args[2:])
	case "write":
		err = runWriter(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "elected-writer:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: elected-writer store -listen ADDR | elected-writer write -cell ADDRS -dir DIR -name NAME -store URL")
	os.Exit(2)
}

// store is the fenced store: an append-only log.
type store struct {
	guard *fence.Guard
	mu    sync.Mutex
	log   []string // "GEN TEXT"
}

func runStore(args []string) error {
	fl := flag.NewFlagSet("store", flag.ExitOnError)
	listen := fl.String("listen", "127.0.0.1:9000", "address to serve on")
	fl.Parse(args)
	s := &store{guard: fence.NewGuard()}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Printf("store listening %s\n", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /append", s.appendHandler)
	mux.HandleFunc("GET /log", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, l := range s.log {
			fmt.Fprintln(w, l)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
		<-stop
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// appendHandler admits the write's sequencer and appends it, under the
// guard's lock (AdmitAndDo), or answers 409 Conflict for a stale one.
func (s *store) appendHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	seq, err := fs.ParseSequencer(r.Header.Get(SeqHeader))
	if err != nil {
		http.Error(w, "a write needs a sequencer: "+err.Error(), http.StatusBadRequest)
		return
	}
	err = s.guard.AdmitAndDo(seq, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.log = append(s.log, fmt.Sprintf("%d %s", seq.Gen, bytes.TrimSpace(body)))
		return nil
	})
	if errors.Is(err, fence.ErrStale) {
		fmt.Printf("refused %s %s\n", seq, bytes.TrimSpace(body))
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	fmt.Printf("admitted %s %s\n", seq, bytes.TrimSpace(body))
}

func runWriter(args []string) error {
	fl := flag.NewFlagSet("write", flag.ExitOnError)
	cell := fl.String("cell", "127.0.0.1:7100", "the cell's servers, comma-separated")
	dir := fl.String("dir", "/ls/local/writer", "the election's directory")
	name := fl.String("name", "", "this writer's name (its election value)")
	storeURL := fl.String("store", "http://127.0.0.1:9000", "the fenced store")
	ttl := fl.Duration("ttl", 12*time.Second, "session TTL")
	delay := fl.Duration("delay", time.Second, "lock-delay of the election")
	every := fl.Duration("every", 100*time.Millisecond, "time between two writes while leading")
	fl.Parse(args)
	if *name == "" {
		return errors.New("-name is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := client.Config{Servers: strings.Split(*cell, ","), SessionTTL: *ttl}
	for ctx.Err() == nil {
		// One session at a time; when it expires (a long pause, a
		// partition) a new one campaigns again.
		c, err := client.Dial(ctx, cfg)
		if err != nil {
			return err
		}
		campaignLoop(ctx, c, *dir, *name, *storeURL, *delay, *every)
		c.Close()
	}
	return nil
}

// campaignLoop campaigns and leads, term after term, until the session
// expires or ctx ends.
func campaignLoop(ctx context.Context, c *client.Client, dir, name, storeURL string, delay, every time.Duration) {
	e := election.New(c, dir, election.LockDelay(delay))
	for ctx.Err() == nil && c.State() != client.SessionExpired {
		term, err := e.Campaign(ctx, []byte(name))
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, client.ErrSessionExpired) {
				fmt.Fprintln(os.Stderr, "campaign:", err)
				time.Sleep(time.Second)
			}
			continue
		}
		fmt.Printf("leading %s %s\n", name, term.Sequencer())
		lead(ctx, term, name, storeURL, every)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.Resign(rctx) // the term may have ended on the cell already
		cancel()
	}
}

// lead writes while the term lasts: every write carries the term's
// sequencer. It returns when the term may be lost, the store refuses the
// sequencer (a newer leader wrote), or ctx ends.
func lead(ctx context.Context, term *election.Term, name, storeURL string, every time.Duration) {
	seq := term.Sequencer().String()
	for i := 1; ; i++ {
		select {
		case <-term.Done():
			fmt.Printf("lost %s %s\n", name, seq)
			return
		case <-ctx.Done():
			return
		default:
		}
		req, _ := http.NewRequest(http.MethodPost, storeURL+"/append", strings.NewReader(fmt.Sprintf("%s %d", name, i)))
		req.Header.Set(SeqHeader, seq)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusConflict {
				fmt.Printf("refused %s %s\n", name, seq)
				return
			}
		}
		select {
		case <-time.After(every):
		case <-term.Done():
		case <-ctx.Done():
		}
	}
}
