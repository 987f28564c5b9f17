package server

import "time"

// workerPool runs calls on goroutines kept between calls. A call started
// on a fresh goroutine grows its stack as it goes deep (decode, checks,
// propose), copying it each time: at 64 clients that was about 6 % of the
// master's CPU (issue 13's profile). A worker keeps its grown stack for the
// next call. A worker idle for idleWorker ends, and every idle one ends
// when the server shuts down.
type workerPool struct {
	work chan func() // unbuffered: a send succeeds only if a worker waits
	stop <-chan struct{}
}

const idleWorker = 10 * time.Second

func newWorkerPool(stop <-chan struct{}) *workerPool {
	return &workerPool{work: make(chan func()), stop: stop}
}

// run runs f on an idle worker, or on a new one if none waits; it never
// blocks.
func (p *workerPool) run(f func()) {
	select {
	case p.work <- f:
	default:
		go p.worker(f)
	}
}

func (p *workerPool) worker(f func()) {
	idle := time.NewTimer(idleWorker)
	defer idle.Stop()
	for {
		f()
		f = nil // no reference to the call while idle
		idle.Reset(idleWorker)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		case <-p.stop:
			return
		}
	}
}
