package netproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/internal/enum"
)

// Mode is what a Link does with the connections it carries.
type Mode int

// The modes. Every mode but Pass is a cut; Up returns to Pass.
const (
	// Pass forwards both ways, each chunk after the link's delay.
	Pass Mode = iota
	// Refuse resets every connection (RST, as a peer that lost the
	// connection's state does) and resets new ones as soon as they are
	// accepted: the dialer sees the link fail at once.
	Refuse
	// Blackhole closes every connection; new ones are accepted and what
	// they send is read and thrown away, never reaching the target; they
	// are closed when the mode changes. The dialer sees a connection that
	// never answers.
	Blackhole
	// Stall keeps every connection open but forwards nothing either way
	// until the mode changes; new connections are accepted and wait,
	// without the target being dialled. Bytes read meanwhile are kept and
	// delivered, in order, when the link comes up.
	Stall
)

var modeNames = [...]string{Pass: "up", Refuse: "refuse", Blackhole: "blackhole", Stall: "stall"}

func (m Mode) String() string { return enum.Name(modeNames[:], m, "Mode") }

// DialTimeout bounds a dial to the target; a connection whose target could
// not be dialled is closed.
const DialTimeout = 5 * time.Second

// chunkSize is the most a pump reads at once; chunkQueue is how many chunks
// a direction may hold (read, not yet written) before it stops reading.
const (
	chunkSize  = 32 << 10
	chunkQueue = 64
)

// Link is a TCP proxy for one link: it listens on a loopback port and
// forwards every connection it accepts to its target, unless it is cut.
// It is safe for concurrent use.
type Link struct {
	name string
	ln   net.Listener

	mu         sync.Mutex
	target     string
	mode       Mode
	delay      time.Duration
	jitter     func() time.Duration // nil: none
	changed    chan struct{}        // closed and replaced when mode or delay changes, and at Close
	pairs      map[*pair]struct{}
	swallowing map[net.Conn]struct{} // blackholed connections
	closed     bool
	stats      Stats

	bytesUp, bytesDown atomic.Int64

	wg sync.WaitGroup // the accept loop and every connection's goroutines
}

// Stats counts what a Link did since it started.
type Stats struct {
	// Accepted connections, whatever happened to them.
	Accepted int
	// Forwarded: connections dialled through to the target.
	Forwarded int
	// Refused: closed as soon as accepted (Refuse), or because the target
	// could not be dialled.
	Refused int
	// Swallowed: accepted while the link was a Blackhole.
	Swallowed int
	// Cut: forwarded connections closed by Cut (Refuse or Blackhole).
	Cut int
	// BytesUp and BytesDown are the bytes written to the target and back
	// to the dialers (a chunk counts from the start of its write, so bytes
	// an end has received are always counted).
	BytesUp, BytesDown int64
}

// Listen starts a Link on a free loopback port that forwards to target.
// name is for messages only.
func Listen(name, target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netproxy %s: listen: %w", name, err)
	}
	l := &Link{name: name, ln: ln, target: target, changed: make(chan struct{}),
		pairs: map[*pair]struct{}{}, swallowing: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Name is the name given to Listen.
func (l *Link) Name() string { return l.name }

// Addr is the address dialers use instead of the target's.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Target is the address new connections are forwarded to.
func (l *Link) Target() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.target
}

// SetTarget changes where new connections are forwarded to; connections
// already forwarded keep their target.
func (l *Link) SetTarget(addr string) {
	l.mu.Lock()
	l.target = addr
	l.mu.Unlock()
}

// State is the link's mode and delay.
func (l *Link) State() (Mode, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mode, l.delay
}

// Stats returns the link's counters.
func (l *Link) Stats() Stats {
	l.mu.Lock()
	st := l.stats
	l.mu.Unlock()
	st.BytesUp, st.BytesDown = l.bytesUp.Load(), l.bytesDown.Load()
	return st
}

// Up ends a cut: connections flow again (stalled ones resume with what
// they had sent; blackholed ones are closed). The delay is kept.
func (l *Link) Up() { l.Set(Pass, l.currentDelay()) }

// Cut cuts the link in mode m (Refuse, Blackhole or Stall; Pass is Up).
// The delay is kept for when the link comes up.
func (l *Link) Cut(m Mode) { l.Set(m, l.currentDelay()) }

// Delay makes every chunk wait d (0: none) between being read from one end
// and written to the other, in both directions; chunks already read keep
// the delay they were read with. The mode is kept.
func (l *Link) Delay(d time.Duration) {
	l.mu.Lock()
	m := l.mode
	l.mu.Unlock()
	l.Set(m, d)
}

// Heal sets the link up with no delay.
func (l *Link) Heal() { l.Set(Pass, 0) }

// Set sets the mode and the delay at once. Going to Refuse or Blackhole
// closes every forwarded connection; leaving Blackhole closes the
// connections it swallowed.
func (l *Link) Set(m Mode, d time.Duration) {
	if d < 0 {
		d = 0
	}
	l.mu.Lock()
	if l.closed || (m == l.mode && d == l.delay) {
		l.mu.Unlock()
		return
	}
	var cut []*pair
	if m == Refuse || m == Blackhole {
		for p := range l.pairs {
			cut = append(cut, p)
			delete(l.pairs, p)
		}
		l.stats.Cut += len(cut)
	}
	var swallowed []net.Conn
	if l.mode == Blackhole && m != Blackhole {
		for c := range l.swallowing {
			swallowed = append(swallowed, c)
			delete(l.swallowing, c)
		}
	}
	l.mode, l.delay = m, d
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	for _, p := range cut {
		if m == Refuse {
			p.reset()
		}
		p.shut()
	}
	for _, c := range swallowed {
		c.Close()
	}
}

func (l *Link) currentDelay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delay
}

// Jitter adds to every chunk read from now on, in both directions, a
// random delay of its own on top of Delay: sample is called once per chunk
// (a negative sample counts as 0); nil turns jitter off. sample is called
// from the reading goroutines of every connection at once, so it must be
// safe for concurrent use. Chunks keep their order: a chunk is never due
// before the chunk read before it in the same direction of the same
// connection, so its due time is
//
//	max(previous chunk's due time, read time + delay + sample())
//
// and one long sample holds back what follows it, as a lost TCP segment
// holds back the rest of the stream until its retransmission arrives.
func (l *Link) Jitter(sample func() time.Duration) {
	l.mu.Lock()
	l.jitter = sample
	l.mu.Unlock()
}

// chunkDelay is the delay of a chunk read now: the link's delay plus a
// jitter sample.
func (l *Link) chunkDelay() time.Duration {
	l.mu.Lock()
	d, jitter := l.delay, l.jitter
	l.mu.Unlock()
	if jitter != nil {
		d += max(jitter(), 0)
	}
	return d
}

// Close stops listening, closes every connection and waits until every
// goroutine of the link has returned. It is idempotent.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var ps []*pair
	for p := range l.pairs {
		ps = append(ps, p)
	}
	l.pairs = map[*pair]struct{}{}
	var swallowed []net.Conn
	for c := range l.swallowing {
		swallowed = append(swallowed, c)
	}
	l.swallowing = map[net.Conn]struct{}{}
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	err := l.ln.Close()
	for _, p := range ps {
		p.shut()
	}
	for _, c := range swallowed {
		c.Close()
	}
	l.wg.Wait()
	return err
}

func (l *Link) acceptLoop() {
	defer l.wg.Done()
	for {
		cc, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			cc.Close()
			continue
		}
		l.stats.Accepted++
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serve(cc)
	}
}

// serve handles one accepted connection according to the mode, until it
// is forwarded and done, refused, or swallowed and closed.
func (l *Link) serve(cc net.Conn) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			cc.Close()
			return
		}
		mode, changed, target := l.mode, l.changed, l.target
		switch mode {
		case Refuse:
			l.stats.Refused++
			l.mu.Unlock()
			resetClose(cc)
			return
		case Blackhole:
			l.stats.Swallowed++
			l.swallowing[cc] = struct{}{}
			l.mu.Unlock()
			io.Copy(io.Discard, cc) // until the dialer or a mode change closes it
			l.mu.Lock()
			delete(l.swallowing, cc)
			l.mu.Unlock()
			cc.Close()
			return
		case Stall:
			l.mu.Unlock()
			<-changed // Close closes it too
			continue
		}
		l.mu.Unlock()
		sc, err := net.DialTimeout("tcp", target, DialTimeout)
		if err != nil {
			l.mu.Lock()
			l.stats.Refused++
			l.mu.Unlock()
			cc.Close()
			return
		}
		l.mu.Lock()
		if l.closed || l.mode == Refuse || l.mode == Blackhole {
			// Cut while dialling: the target saw a connection open and
			// close, as it would have on a real link.
			l.mu.Unlock()
			sc.Close()
			continue
		}
		p := &pair{l: l, cc: cc, sc: sc, done: make(chan struct{})}
		l.pairs[p] = struct{}{}
		l.stats.Forwarded++
		l.mu.Unlock()
		p.run()
		l.mu.Lock()
		delete(l.pairs, p)
		l.mu.Unlock()
		return
	}
}

// pair is one forwarded connection: the dialer's (cc) and the target's (sc).
type pair struct {
	l      *Link
	cc, sc net.Conn
	once   sync.Once
	done   chan struct{} // closed by shut
}

// reset makes the coming shut send RST on both connections instead of
// FIN.
func (p *pair) reset() {
	for _, c := range []net.Conn{p.cc, p.sc} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
	}
}

// resetClose closes c with RST.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// shut closes both connections (the pumps then return).
func (p *pair) shut() {
	p.once.Do(func() {
		close(p.done)
		p.cc.Close()
		p.sc.Close()
	})
}

// run pumps both directions until both have ended (each by a clean EOF,
// passed on as a half-close) or either failed, then closes both ends.
func (p *pair) run() {
	var wg sync.WaitGroup
	wg.Add(2)
	go p.pump(p.cc, p.sc, &p.l.bytesUp, &wg)
	go p.pump(p.sc, p.cc, &p.l.bytesDown, &wg)
	wg.Wait()
	p.shut()
}

type chunk struct {
	data []byte
	due  time.Time
	eof  bool
}

// pump copies src to dst: a reader goroutine stamps each chunk with its due
// time (read time + delay + jitter, never before the previous chunk's) and
// queues it; this goroutine writes each chunk once it is due and the link
// is not stalled.
func (p *pair) pump(src, dst net.Conn, count *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	chunks := make(chan chunk, chunkQueue)
	go func() {
		defer close(chunks)
		var last time.Time // the due time of the previous chunk
		due := func() time.Time {
			d := time.Now().Add(p.l.chunkDelay())
			if d.Before(last) {
				d = last
			}
			last = d
			return d
		}
		for {
			buf := make([]byte, chunkSize)
			n, err := src.Read(buf)
			if n > 0 {
				c := chunk{data: buf[:n], due: due()}
				select {
				case chunks <- c:
				case <-p.done:
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					select {
					case chunks <- chunk{eof: true, due: due()}:
					case <-p.done:
					}
				} else {
					p.shut()
				}
				return
			}
		}
	}()
	defer func() {
		for range chunks { // let the reader return
		}
	}()
	for c := range chunks {
		if !p.wait(c.due) {
			return
		}
		if c.eof {
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
		// Counted before the write, so a reader that has the bytes sees
		// them in Stats; what a failed write did not deliver is taken back.
		count.Add(int64(len(c.data)))
		if n, err := dst.Write(c.data); err != nil {
			count.Add(int64(n - len(c.data)))
			p.shut()
			return
		}
	}
}

// wait blocks until due has passed and the link is not stalled; false if
// the pair was shut meanwhile.
func (p *pair) wait(due time.Time) bool {
	for {
		p.l.mu.Lock()
		mode, changed := p.l.mode, p.l.changed
		p.l.mu.Unlock()
		if mode == Stall {
			select {
			case <-changed:
				continue
			case <-p.done:
				return false
			}
		}
		d := time.Until(due)
		if d <= 0 {
			select {
			case <-p.done:
				return false
			default:
				return true
			}
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-changed:
			t.Stop()
		case <-p.done:
			t.Stop()
			return false
		}
	}
}
