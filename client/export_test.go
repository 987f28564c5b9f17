package client

import "time"

// PoolSearches is how many searches for the master p's Clients made.
func PoolSearches(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.searched
}

// SetProbeStagger sets how long a search for the master waits on a
// server's answer before asking the next, until the test ends.
func SetProbeStagger(t interface{ Cleanup(func()) }, d time.Duration) {
	old := probeStagger
	probeStagger = d
	t.Cleanup(func() { probeStagger = old })
}

// PoolRecords is how many searches and failed dials p keeps.
func PoolRecords(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.searches) + len(p.failed)
}

// AgePoolRecords moves p's searches and failed dials d into the past.
func AgePoolRecords(p *Pool, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.searches {
		s.at = s.at.Add(-d)
	}
	for k, f := range p.failed {
		f.at = f.at.Add(-d)
		p.failed[k] = f
	}
}
