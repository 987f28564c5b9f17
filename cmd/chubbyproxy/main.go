// Command chubbyproxy is a Chubby §3.1 proxy in front of a cell: clients
// connect to it with the same protocol and the same client package, and
// it carries their calls to the master over one connection, renewing all
// their sessions with one KeepAliveMany per hold, and answers their
// uncached reads from a cache of its own, kept coherent by the master like
// any client's (package proxy).
//
//	chubbyproxy -cell ADDRS -listen HOST:PORT [-name NAME] [-peers ADDRS] [-no-cache]
//
// Clients list the proxies as their servers (client.Config.Servers, with
// FixedServers; chubbysh -cell); when a proxy dies they go on through
// another with their sessions and locks. Exit codes: 0 after SIGINT or
// SIGTERM, 1 when the cell cannot be reached at start, 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/internal/commalist"
	"github.com/chubby-dev/chubby/proxy"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fl := flag.NewFlagSet("chubbyproxy", flag.ContinueOnError)
	fl.SetOutput(stderr)
	cell := fl.String("cell", "127.0.0.1:7100", "comma-separated RPC addresses of the cell's servers")
	listen := fl.String("listen", "127.0.0.1:7400", "address clients connect to")
	name := fl.String("name", "", "the proxy's name in its Hello answers (default: its address)")
	peers := fl.String("peers", "", "comma-separated addresses of every proxy clients may use, this one among them (default: this one's)")
	noCache := fl.Bool("no-cache", false, "forward every read to the master instead of answering clients' uncached reads from the proxy's own cache")
	timeout := fl.Duration("timeout", 30*time.Second, "how long to keep trying to reach the cell's master at start")
	level := fl.String("log-level", "info", "trace, debug, info, warn or error")
	var tlsCA, tlsCert, tlsKey string
	fl.StringVar(&tlsCA, "tls-ca", "", "(not supported yet)")
	fl.StringVar(&tlsCert, "tls-cert", "", "(not supported yet)")
	fl.StringVar(&tlsKey, "tls-key", "", "(not supported yet)")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "chubbyproxy: unexpected argument %q\n", fl.Arg(0))
		return 2
	}
	if tlsCA != "" || tlsCert != "" || tlsKey != "" {
		// Through a proxy every call reaches the master on the proxy's
		// connection, so the master would take the proxy's certificate
		// for every client's principal: TLS needs the proxy to vouch for
		// its clients' identities, which is not built.
		fmt.Fprintln(stderr, "chubbyproxy: TLS is not supported yet: the master would see every client as the proxy's principal")
		return 2
	}
	servers := split(*cell)
	if len(servers) == 0 {
		fmt.Fprintln(stderr, "chubbyproxy: -cell: no server addresses")
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "chubbyproxy", Level: hclog.LevelFromString(*level), Output: stderr})
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	p, err := proxy.Start(ctx, proxy.Config{Cell: servers, Listen: *listen, Name: *name, Peers: split(*peers), Logger: log, NoCache: *noCache})
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "chubbyproxy: %v\n", err)
		return 1
	}
	log.Info("serving", "listen", p.Addr(), "cell", servers)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	log.Info("stopping")
	p.Close()
	return 0
}

func split(s string) []string { return commalist.Split(s) }
