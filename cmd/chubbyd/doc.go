// Command chubbyd runs one server of a chubby cell. With no flags it is a
// one-server cell "local" on 127.0.0.1 with its data in ./chubby-data.
//
//	flags ──▶ server.Config (Validate) ──▶ server.New: raft (bbolt log, TCP
//	transport), memberlist gossip, the RPC listener, /status and /metrics
//	SIGINT/SIGTERM ──▶ Server.Close (a master hands leadership over first)
//
// -procs auto (the default) starts an internal/procs.Controller, which
// runs the process on one processor while it is nearly idle or serves
// one call at a time, and on one more than the cores when it is busy or
// its calls overlap (the server counts them: Server.CallLoad).
//
// Subcommands: `chubbyd restore` prepares a data directory from a backup
// (restore.go); `chubbyd tls ca create`, `chubbyd tls cert create` and
// `chubbyd keygen` are a built-in CA and gossip key generator for setting
// up TLS (tls.go, package internal/devca).
package main
