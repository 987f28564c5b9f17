package client

// PoolSearches is how many searches for the master p's Clients made.
func PoolSearches(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.searched
}
