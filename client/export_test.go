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
