package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/internal/commalist"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the run failed: cell unreachable, interrupted, or errors with -fail-on-error
	exitUsage  = 2
)

// maxSize is the largest file the workloads write: a file's contents limit.
const maxSize = 256 << 10

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are a run's settings, from the command line.
type options struct {
	workload *workload
	servers  []string
	clients  int
	conns    int
	duration time.Duration
	warmup   time.Duration
	rate     float64
	ttl      time.Duration
	timeout  time.Duration
	json     bool
	quiet    bool
	failOn   bool
	// noCache dials every client with client.Config.DisableCache.
	noCache bool
	// metrics is a server's /metrics URL whose process figures the run
	// reports for its measured window ("": none).
	metrics string
	// cpuProfile, if set, is where to write the load tool's own CPU
	// profile of the run.
	cpuProfile string

	// workload flags
	cached bool          // read
	size   int           // read, write, fanout
	hold   time.Duration // contended
	group  bool          // sessions: client.SessionGroup per connection

	// not flags: what tests vary
	mode         client.Mode   // contended's lock mode (Exclusive)
	roundTimeout time.Duration // fanout: how long a write waits for every reader
}

// usageError is a bad command line; run prints it and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "chubbybench: %v\n", err)
		hint := "chubbybench -h explains the workloads and flags"
		if o != nil && o.workload != nil {
			hint = "chubbybench " + o.workload.name + " -h explains the workload and its flags"
		}
		fmt.Fprintf(stderr, "(%s)\n", hint)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "chubbybench: -cpuprofile: %v\n", err)
			return exitFailed
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	e := newEnv(o, stderr)
	r, err := o.workload.run(ctx, e)
	e.close()
	if err == nil {
		var fs []Figure
		fs, err = e.usage.figures()
		r.Extras = append(r.Extras, fs...)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintf(stderr, "chubbybench: %s: %v\n", o.workload.name, err)
		return exitFailed
	}
	if o.json {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "chubbybench: write the report: %v\n", err)
		return exitFailed
	}
	switch {
	case r.Interrupted:
		fmt.Fprintf(stderr, "chubbybench: %s: interrupted: the figures cover %s\n", o.workload.name, fmtSeconds(r.Duration))
		return exitFailed
	case o.failOn && r.failures() > 0:
		fmt.Fprintf(stderr, "chubbybench: %s: %d failures (-fail-on-error)", o.workload.name, r.failures())
		if r.FirstError != "" {
			fmt.Fprintf(stderr, "; the first: %s", r.FirstError)
		}
		fmt.Fprintln(stderr)
		return exitFailed
	}
	return exitOK
}

// failures is what -fail-on-error counts: errors, and sessions lost.
func (r *Result) failures() int64 {
	n := r.Errors
	for _, f := range r.Extras {
		if f.Key == "sessions_lost" {
			n += f.Value.(int64)
		}
	}
	return n
}

// parse reads the command line: WORKLOAD [flags]. Help (-h) is printed on
// help and reported as flag.ErrHelp.
func parse(args []string, help io.Writer) (*options, error) {
	if len(args) == 0 {
		return nil, usagef("name a workload: %s", strings.Join(workloadNames(), ", "))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		printUsage(help)
		return nil, flag.ErrHelp
	}
	if strings.HasPrefix(args[0], "-") {
		return nil, usagef("name the workload before the flags: chubbybench WORKLOAD %s ...", args[0])
	}
	w := lookupWorkload(args[0])
	if w == nil {
		return nil, usagef("no workload %q: the workloads are %s", args[0], strings.Join(workloadNames(), ", "))
	}
	o := &options{workload: w, mode: client.Exclusive, roundTimeout: 10 * time.Second}
	fl := flagSet(w, o)
	fl.SetOutput(io.Discard) // run prints the error itself, with a hint
	var cell string
	fl.StringVar(&cell, "cell", defaultCell(), "comma-separated RPC addresses of servers of the cell ($CHUBBY_CELL)")
	if err := fl.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printWorkloadUsage(help, w, fl)
			return o, flag.ErrHelp
		}
		return o, &usageError{err.Error()}
	}
	if fl.NArg() > 0 {
		return o, usagef("unexpected argument %q (flags come after the workload; every value belongs to a flag)", fl.Arg(0))
	}
	o.servers = splitServers(cell)
	return o, o.validate()
}

// flagSet declares the common flags and w's own on a new flag set.
func flagSet(w *workload, o *options) *flag.FlagSet {
	fl := flag.NewFlagSet("chubbybench "+w.name, flag.ContinueOnError)
	fl.IntVar(&o.clients, "clients", w.defClients, w.clientsHelp)
	fl.IntVar(&o.conns, "conns", 0, "connections the clients share (client i uses connection i mod N, renewing its session with the others' in one KeepAliveMany); 0 or -clients: each client has its own")
	fl.DurationVar(&o.duration, "duration", 10*time.Second, "length of the measured window")
	fl.DurationVar(&o.warmup, "warmup", time.Second, "load before the measured window, not counted")
	fl.Float64Var(&o.rate, "rate", w.defRate, w.rateHelp)
	fl.DurationVar(&o.ttl, "ttl", 0, "session TTL to ask for (0: the cell's default)")
	fl.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to keep trying to reach the cell when creating a session")
	fl.BoolVar(&o.json, "json", false, "print one JSON object instead of the table")
	fl.BoolVar(&o.quiet, "quiet", false, "no progress bar (there is none anyway when stderr is not a terminal)")
	fl.StringVar(&o.metrics, "server-metrics", "", "a server's /metrics URL (chubbyd -http-addr, e.g. http://127.0.0.1:7180/metrics): report its CPU over the measured window and its memory (server_cpu_cores, server_rss_mb)")
	fl.BoolVar(&o.noCache, "no-cache", false, "clients without a cache (client.Config.DisableCache): the master never waits for them to flush one, as before a write after a failover")
	fl.StringVar(&o.cpuProfile, "cpuprofile", "", "write chubbybench's own CPU profile of the run to this file (go tool pprof)")
	fl.BoolVar(&o.failOn, "fail-on-error", false, "exit 1 if any operation failed (or, for sessions, a session was lost)")
	if w.flags != nil {
		w.flags(fl, o)
	}
	return fl
}

func (o *options) validate() error {
	switch {
	case len(o.servers) == 0:
		return usagef("-cell: no server addresses")
	case o.clients < o.workload.minClients:
		return usagef("-clients %d: %s needs at least %d", o.clients, o.workload.name, o.workload.minClients)
	case o.conns < 0 || o.conns > o.clients:
		return usagef("-conns %d with -clients %d: must be 0 (a connection per client) to %d", o.conns, o.clients, o.clients)
	case o.duration <= 0:
		return usagef("-duration %v: must be positive", o.duration)
	case o.warmup < 0:
		return usagef("-warmup %v: must not be negative", o.warmup)
	case o.rate < 0:
		return usagef("-rate %g: must not be negative (0: no cap)", o.rate)
	case o.ttl < 0:
		return usagef("-ttl %v: must not be negative (0: the cell's default)", o.ttl)
	case o.timeout <= 0:
		return usagef("-timeout %v: must be positive", o.timeout)
	case o.size < 0 || o.size > maxSize:
		return usagef("-size %d: must be 0 to %d bytes", o.size, maxSize)
	case o.hold < 0:
		return usagef("-hold %v: must not be negative", o.hold)
	}
	return nil
}

func defaultCell() string {
	if c := os.Getenv("CHUBBY_CELL"); c != "" {
		return c
	}
	return "127.0.0.1:7100"
}

func splitServers(s string) []string { return commalist.Split(s) }
