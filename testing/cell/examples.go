package cell

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/server"
)

// ForExamples starts a one-server cell (cell "local") in a temporary
// directory for a package's runnable examples, which have no testing.T,
// and returns its client address and a func that stops it and removes the
// directory. It panics if the cell cannot start.
func ForExamples() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "chubby-example-")
	if err != nil {
		panic(err)
	}
	for attempt := 0; ; attempt++ {
		addrs, err := freeAddrs(3)
		if err != nil {
			panic(err)
		}
		cfg := server.DefaultConfig()
		cfg.NodeID, cfg.HTTPAddr = "example", ""
		cfg.RPCAddr, cfg.RaftAddr, cfg.GossipAddr = addrs[0], addrs[1], addrs[2]
		cfg.DataDir = fmt.Sprintf("%s/%d", dir, attempt) // a failed start may have bootstrapped raft on other ports
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard})
		srv, err := server.New(cfg)
		if err == nil {
			err = srv.Start()
		}
		if err != nil {
			if isBindError(err) && attempt < 5 {
				continue
			}
			panic(fmt.Sprintf("example cell: %v", err))
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		err = srv.WaitMaster(ctx)
		cancel()
		if err != nil {
			panic(fmt.Sprintf("example cell: no master: %v", err))
		}
		return srv.RPCAddr(), func() {
			srv.Close()
			os.RemoveAll(dir)
		}
	}
}

// The cell a package's examples share: started by the first ExampleServers
// and stopped by StopExamples, which the package's TestMain calls after
// m.Run (before a leak check).
var (
	exampleOnce sync.Once
	exampleAddr string
	exampleStop = func() {}
)

// ExampleServers returns the servers of the examples' shared cell,
// starting it the first time.
func ExampleServers() []string {
	exampleOnce.Do(func() { exampleAddr, exampleStop = ForExamples() })
	return []string{exampleAddr}
}

// StopExamples stops the examples' shared cell, if one was started.
func StopExamples() { exampleStop() }
