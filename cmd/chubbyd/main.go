package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/internal/commalist"
	"github.com/chubby-dev/chubby/internal/procs"
	"github.com/chubby-dev/chubby/server"
	"github.com/hashicorp/go-hclog"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "restore":
			return runRestore(args[1:])
		case "tls":
			return runTLS(args[1:])
		case "keygen":
			return runKeygen(args[1:])
		}
	}
	cfg := server.DefaultConfig()
	fl := flag.NewFlagSet("chubbyd", flag.ContinueOnError)
	fl.StringVar(&cfg.NodeID, "node-id", cfg.NodeID, "unique server name")
	fl.StringVar(&cfg.Cell, "cell", cfg.Cell, "cell name; namespace root is /ls/NAME")
	fl.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "raft log, snapshots, state")
	fl.StringVar(&cfg.RPCAddr, "rpc-addr", cfg.RPCAddr, "client RPC address")
	fl.StringVar(&cfg.RaftAddr, "raft-addr", cfg.RaftAddr, "raft transport address")
	fl.StringVar(&cfg.GossipAddr, "gossip-addr", cfg.GossipAddr, "memberlist address")
	fl.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, `/metrics, /status, /healthz ("" disables)`)
	join := fl.String("join", "", "comma-separated gossip addresses of running members")
	fl.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", cfg.BootstrapExpect, "servers to wait for before the cell bootstraps")
	logLevel := fl.String("log-level", "info", "trace, debug, info, warn or error")
	logJSON := fl.Bool("log-json", false, "log one JSON object a line instead of text")
	fl.BoolVar(&cfg.Pprof, "pprof", cfg.Pprof, "serve Go profiles at /debug/pprof/ on -http-addr")
	fl.StringVar(&cfg.RaftLog, "raft-log", cfg.RaftLog, `raft log store: "bolt" (DATA/raft.db) or "wal" (DATA/wal/, raft-wal; a bolt log is migrated at start)`)
	fl.Uint64Var(&cfg.SnapshotThreshold, "snapshot-threshold", cfg.SnapshotThreshold, "raft log entries between snapshots (log compaction)")
	fl.Uint64Var(&cfg.TrailingLogs, "trailing-logs", cfg.TrailingLogs, "raft log entries kept behind a snapshot")
	fl.IntVar(&cfg.MaxConns, "max-conns", cfg.MaxConns, "client connections served at once; more are refused with resource_exhausted")
	fl.IntVar(&cfg.MaxSessions, "max-sessions", cfg.MaxSessions, "live sessions; CreateSession past it fails with resource_exhausted")
	fl.IntVar(&cfg.MaxWaitsPerSession, "max-waits-per-session", cfg.MaxWaitsPerSession, "blocked Acquires one session may have waiting")
	fl.IntVar(&cfg.MaxWatchesPerSession, "max-watches-per-session", cfg.MaxWatchesPerSession, "nodes one session may watch")
	fl.IntVar(&cfg.MaxSessionsPerPrincipal, "max-sessions-per-principal", cfg.MaxSessionsPerPrincipal, "sessions one principal may hold (with TLS)")
	fl.IntVar(&cfg.CreateSessionRate, "create-session-rate", cfg.CreateSessionRate, "CreateSessions a second this master admits (bursts of as many)")
	fl.Int64Var(&cfg.MaxFrameMemory, "max-frame-memory", cfg.MaxFrameMemory, "bytes of large frames (over 64 KiB) read from all connections at once")
	tlsCA := fl.String("tls-ca", "", "PEM CA that signs every certificate of the cell (with -tls-cert and -tls-key: mutual TLS on the RPC port and the raft transport)")
	tlsCert := fl.String("tls-cert", "", "this server's PEM certificate (chubbyd tls cert create -server)")
	tlsKey := fl.String("tls-key", "", "this server's PEM key")
	fl.DurationVar(&cfg.TLSPollInterval, "tls-poll-interval", cfg.TLSPollInterval, "how often the -tls-* files are checked; changed ones are reloaded as on SIGHUP (0: only on SIGHUP)")
	gossipKeyFile := fl.String("gossip-key-file", "", "file holding the gossip encryption key (chubbyd keygen); servers without it are not admitted")
	admins := fl.String("acl-admins", strings.Join(server.DefaultAdmins, ","), "comma-separated principals allowed backups, remove-server and (with TLS) the status page and metrics")
	fl.BoolVar(&cfg.Insecure, "insecure", false, "without TLS, serve on non-loopback addresses anyway (anyone who reaches them can act as any client)")
	procsFlag := fl.String("procs", "auto", `processors for Go code: "auto" (one while the process uses under 0.6 of a core for a second, or under 0.85 while its calls come one at a time; one more than the cores as soon as it uses 0.85 of one, or 0.15 while a third of its calls and sends to sessions overlap; off when GOMAXPROCS is set), "all", or a number`)
	raftRoutes := fl.String("raft-route", "", "comma-separated NAME=HOST:PORT: dial server NAME's raft transport at HOST:PORT instead of its advertised address (NAT, tunnels, proxies); list every other server")
	if err := fl.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "chubbyd: unexpected arguments %q\n", fl.Args())
		return 2
	}
	cfg.Join = append(cfg.Join, commalist.Split(*join)...)
	if *raftRoutes != "" {
		cfg.RaftRoutes = map[string]string{}
		for _, r := range strings.Split(*raftRoutes, ",") {
			if r = strings.TrimSpace(r); r == "" {
				continue
			}
			name, addr, ok := strings.Cut(r, "=")
			if !ok || name == "" || addr == "" {
				fmt.Fprintf(os.Stderr, "chubbyd: -raft-route %q: want NAME=HOST:PORT\n", r)
				return 2
			}
			cfg.RaftRoutes[name] = addr
		}
	}
	if *tlsCA != "" || *tlsCert != "" || *tlsKey != "" {
		cfg.TLS = &server.TLSFiles{CA: *tlsCA, Cert: *tlsCert, Key: *tlsKey}
	}
	cfg.Admins = split(*admins)
	if *gossipKeyFile != "" {
		k, err := readGossipKey(*gossipKeyFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chubbyd: -gossip-key-file: %v\n", err)
			return 2
		}
		cfg.GossipKey = k
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "chubbyd", Level: hclog.LevelFromString(*logLevel), Output: os.Stderr, JSONFormat: *logJSON})
	procsCtl, err := setProcs(*procsFlag, cfg.Logger)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd: -procs: %v\n", err)
		return 2
	}
	defer procsCtl.Stop()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd: %v\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return 2
	}
	srv, err := server.New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd: %v\n", err)
		return 1
	}
	procsCtl.CountCalls(srv.CallLoad)
	if err := srv.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd: %v\n", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	s := <-sig
	for s == syscall.SIGHUP { // reload the TLS files; connections made go on
		if err := srv.ReloadTLS(); err != nil {
			cfg.Logger.Error("SIGHUP: TLS files not reloaded; the ones loaded before stay in use", "err", err)
		}
		s = <-sig
	}
	cfg.Logger.Info("shutting down", "signal", s.String())
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd: shutdown: %v\n", err)
		return 1
	}
	return 0
}

// setProcs applies -procs: "auto" starts a procs.Controller unless the
// GOMAXPROCS environment variable is set, "all" leaves Go's default, and a
// number sets GOMAXPROCS to it.
func setProcs(v string, log hclog.Logger) (*procs.Controller, error) {
	switch v {
	case "auto":
		if os.Getenv("GOMAXPROCS") != "" {
			return nil, nil
		}
		return procs.Start(100*time.Millisecond, func(n int, x procs.Sample) {
			args := []any{"gomaxprocs", n, "cpu_cores", fmt.Sprintf("%.2f", x.Cores)}
			if x.Calls > 0 {
				args = append(args, "calls", x.Calls, "overlapped", x.Overlapped)
			}
			log.Info("processors changed", args...)
		}), nil
	case "all":
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%q: want auto, all or a number of at least 1", v)
	}
	runtime.GOMAXPROCS(n)
	return nil, nil
}

// runRestore is `chubbyd restore`: it prepares an empty data directory from
// a backup (`chubbysh snapshot save`) so that chubbyd started on it is a
// cell of one serving the backup's permanent nodes; more servers join it.
func runRestore(args []string) int {
	def := server.DefaultConfig()
	fl := flag.NewFlagSet("chubbyd restore", flag.ContinueOnError)
	from := fl.String("from", "", "the backup file (chubbysh snapshot save FILE)")
	dataDir := fl.String("data-dir", "", "an empty data directory to prepare")
	nodeID := fl.String("node-id", def.NodeID, "the -node-id the restored server will run with")
	raftAddr := fl.String("raft-addr", def.RaftAddr, "the -raft-addr the restored server will run with")
	cell := fl.String("cell", "", "refuse a backup of another cell (default: the backup's cell)")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "usage: chubbyd restore -from FILE -data-dir DIR [-node-id ID] [-raft-addr ADDR] [-cell NAME]\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *from == "" || *dataDir == "" || fl.NArg() > 0 {
		fl.Usage()
		return 2
	}
	f, err := os.Open(*from)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd restore: %v\n", err)
		return 1
	}
	st, err := fs.ReadBackup(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd restore: %s: %v\n", *from, err)
		return 1
	}
	if *cell != "" && *cell != st.Cell() {
		fmt.Fprintf(os.Stderr, "chubbyd restore: %s is a backup of cell %q, not %q\n", *from, st.Cell(), *cell)
		return 1
	}
	if err := server.RestoreDataDir(*dataDir, *nodeID, *raftAddr, st); err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd restore: %v\n", err)
		return 1
	}
	fmt.Printf("restored %d nodes of cell %q into %s; start it with:\n  chubbyd -cell %s -node-id %s -raft-addr %s -data-dir %s\n",
		st.NodeCount(), st.Cell(), *dataDir, st.Cell(), *nodeID, *raftAddr, *dataDir)
	return 0
}
