package fs

import "sort"

// Read-only views of the locks for status pages and metrics. They copy what
// they return, so the caller may keep it after the read lock is released;
// they never change the state.

// LockHolder is a session holding a lock.
type LockHolder struct {
	Session   uint64
	Mode      Mode
	LockDelay int64 // nanoseconds: how long the lock stays out of reach if the session expires
}

// LockWaiter is a blocked Acquire queued on a lock, in queue order.
type LockWaiter struct {
	Session   uint64
	Mode      Mode
	WaitID    uint64
	LockDelay int64
}

// LockInfo is one node's lock as the replicated state has it.
type LockInfo struct {
	Path    string
	Mode    Mode   // of the holders; meaningless while none
	LockGen uint64 // the generation of the current (or last) hold
	Holders []LockHolder
	Waiters []LockWaiter
	// DelayUntil: the lock may not be granted before this time (Unix ns)
	// because a holder's session expired (lock-delay); 0 if none.
	DelayUntil int64
}

// Lock returns the lock of the node at path.
func (s *State) Lock(path string) (LockInfo, error) {
	n, err := s.lookup(path, 0)
	if err != nil {
		return LockInfo{}, err
	}
	return lockInfo(path, n), nil
}

func lockInfo(path string, n *node) LockInfo {
	li := LockInfo{Path: path, Mode: n.LockMode, LockGen: n.Stat.LockGen, DelayUntil: n.DelayUntil}
	for id, h := range n.Holders {
		li.Holders = append(li.Holders, LockHolder{Session: id, Mode: h.Mode, LockDelay: h.LockDelay})
	}
	sort.Slice(li.Holders, func(i, j int) bool { return li.Holders[i].Session < li.Holders[j].Session })
	for _, w := range n.Waiters {
		li.Waiters = append(li.Waiters, LockWaiter(w))
	}
	return li
}

// LockSummary counts the cell's locks and lists the few an operator looks
// at first.
type LockSummary struct {
	// Held is the number of locks with a holder; Exclusive and Shared split it.
	Held, Exclusive, Shared int
	// Waiters is the number of blocked Acquires queued on all locks.
	Waiters int
	// Contended are the locks with the most waiters (ties: by path), at
	// most the limit given to Locks.
	Contended []LockInfo
	// Delayed are the free locks still inside a lock-delay at the time
	// given to Locks, soonest end first, at most the limit given.
	Delayed []LockInfo
	// DelayedCount is how many locks are inside a lock-delay (Delayed may
	// list fewer).
	DelayedCount int
}

// Locks summarises every lock: counts, the top contended ones and the
// lock-delays in force at now (Unix ns). It looks at every node once; the
// lists hold at most limit entries each.
func (s *State) Locks(now int64, limit int) LockSummary {
	var sum LockSummary
	var contended, delayed []string
	for p, n := range s.nodes {
		if len(n.Holders) > 0 {
			sum.Held++
			if n.LockMode == Exclusive {
				sum.Exclusive++
			} else {
				sum.Shared++
			}
		}
		sum.Waiters += len(n.Waiters)
		if len(n.Waiters) > 0 {
			contended = append(contended, p)
		}
		if len(n.Holders) == 0 && n.DelayUntil > now {
			delayed = append(delayed, p)
		}
	}
	sum.DelayedCount = len(delayed)
	if limit <= 0 {
		return sum
	}
	sort.Slice(contended, func(i, j int) bool {
		a, b := len(s.nodes[contended[i]].Waiters), len(s.nodes[contended[j]].Waiters)
		if a != b {
			return a > b
		}
		return contended[i] < contended[j]
	})
	sort.Slice(delayed, func(i, j int) bool {
		a, b := s.nodes[delayed[i]].DelayUntil, s.nodes[delayed[j]].DelayUntil
		if a != b {
			return a < b
		}
		return delayed[i] < delayed[j]
	})
	for _, p := range contended[:min(limit, len(contended))] {
		sum.Contended = append(sum.Contended, lockInfo(p, s.nodes[p]))
	}
	for _, p := range delayed[:min(limit, len(delayed))] {
		sum.Delayed = append(sum.Delayed, lockInfo(p, s.nodes[p]))
	}
	return sum
}
