package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/session"
)

// journalSize bounds the recent events a server keeps for its status page.
const journalSize = 100

// journal is a small ring of recent cell events as this server saw them —
// leader changes, becoming and ceasing to be master, session expiries,
// servers joining, leaving, failing heartbeats — for the status page. It is
// not replicated and starts empty at each start; the logs keep the rest.
type journal struct {
	clock session.Clock

	mu   sync.Mutex
	ring [journalSize]journalEntry
	next int // where the next entry goes
	n    int // entries held, at most journalSize
}

// journalEntry is one recent event.
type journalEntry struct {
	At   time.Time
	Kind string // leader, master, expiry, member, heartbeat
	Text string
}

func newJournal(clock session.Clock) *journal { return &journal{clock: clock} }

// add records an event now.
func (j *journal) add(kind, format string, args ...any) {
	e := journalEntry{At: j.clock.Now(), Kind: kind, Text: fmt.Sprintf(format, args...)}
	j.mu.Lock()
	j.ring[j.next] = e
	j.next = (j.next + 1) % journalSize
	j.n = min(j.n+1, journalSize)
	j.mu.Unlock()
}

// recent returns up to limit events, newest first.
func (j *journal) recent(limit int) []journalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]journalEntry, 0, min(limit, j.n))
	for i := 1; i <= j.n && len(out) < limit; i++ {
		out = append(out, j.ring[(j.next-i+journalSize)%journalSize])
	}
	return out
}
