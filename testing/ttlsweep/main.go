package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if isChild() {
		os.Exit(childMain())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the experiment: the flags, checked.
type config struct {
	TTLs     []time.Duration
	Runs     int
	Kills    int
	SkipKill bool
	Sessions int
	Procs    int
	Duration time.Duration
	// Settle is the quiet time (no pauses) after Duration before the
	// counters are read: reports of expiries caused by the last pauses
	// reach the counters.
	Settle          time.Duration
	Jitter          logNormal
	Pause           logNormal
	PauseEvery      time.Duration
	DialConcurrency int
	Seed            uint64
	Chubbyd         string
	Out             string
}

// defaultTTLs are the TTLs of issue 16.
var defaultTTLs = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
	5 * time.Second, 12 * time.Second, 30 * time.Second}

func defaultConfig() config {
	return config{
		TTLs:     defaultTTLs,
		Runs:     3,
		Kills:    1,
		Sessions: 1000,
		Procs:    10,
		Duration: 60 * time.Second,
		Settle:   2 * time.Second,
		// Jitter: most chunks cross at once, one in ten waits ≥ 25 ms, one
		// in a hundred ≥ 200 ms; capped at 1 s, a segment lost once and
		// recovered by TCP's initial retransmission timeout.
		Jitter: logNormal{Median: 2 * time.Millisecond, P99: 200 * time.Millisecond, Max: time.Second},
		// Pauses: mostly GC-sized, p99 a 1 s stop-the-world (a swapped or
		// descheduled process), capped at 3 s.
		Pause:           logNormal{Median: 30 * time.Millisecond, P99: time.Second, Max: 3 * time.Second},
		PauseEvery:      5 * time.Second,
		DialConcurrency: 16,
		Seed:            1,
		Out:             "docs",
	}
}

// Validate reports every setting that cannot be used, naming its flag and
// value.
func (c config) Validate() error {
	var errs []error
	if len(c.TTLs) == 0 {
		errs = append(errs, errors.New("-ttls: no TTL given"))
	}
	for _, ttl := range c.TTLs {
		if ttl <= 0 {
			errs = append(errs, fmt.Errorf("-ttls: TTL %v must be positive", ttl))
		}
	}
	if c.Runs < 1 {
		errs = append(errs, fmt.Errorf("-runs %d: at least 1", c.Runs))
	}
	if c.Kills < 1 {
		errs = append(errs, fmt.Errorf("-kills %d: at least 1", c.Kills))
	}
	if c.Sessions < 0 {
		errs = append(errs, fmt.Errorf("-sessions %d: must not be negative", c.Sessions))
	}
	if c.Sessions > 0 && (c.Procs < 1 || c.Procs > c.Sessions) {
		errs = append(errs, fmt.Errorf("-procs %d: between 1 and -sessions %d", c.Procs, c.Sessions))
	}
	if c.Sessions > 0 && c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("-duration %v: must be positive", c.Duration))
	}
	if c.Sessions == 0 && c.SkipKill {
		errs = append(errs, errors.New("-skip-kill with -sessions 0 measures nothing"))
	}
	if c.PauseEvery < 0 {
		errs = append(errs, fmt.Errorf("-pause-every %v: must not be negative (0: no pauses)", c.PauseEvery))
	}
	if c.DialConcurrency < 1 {
		errs = append(errs, fmt.Errorf("-dial-concurrency %d: at least 1", c.DialConcurrency))
	}
	if c.Jitter.Median != 0 {
		errs = append(errs, c.Jitter.Validate("-jitter"))
	}
	if c.PauseEvery > 0 {
		errs = append(errs, c.Pause.Validate("-pause"))
	}
	return errors.Join(errs...)
}

// ttlList is the -ttls flag: durations ("250ms", "12s") or bare seconds.
type ttlList []time.Duration

func (l *ttlList) String() string {
	parts := make([]string, len(*l))
	for i, d := range *l {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

func (l *ttlList) Set(s string) error {
	var out []time.Duration
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		d, err := time.ParseDuration(p)
		if err != nil {
			secs, ferr := strconv.ParseFloat(p, 64)
			if ferr != nil {
				return fmt.Errorf("%q: not a duration", p)
			}
			d = time.Duration(secs * float64(time.Second))
		}
		out = append(out, d)
	}
	*l = out
	return nil
}

// parseFlags turns the command line into a checked config.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fl := flag.NewFlagSet("ttlsweep", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./testing/ttlsweep [flags]\n\n"+
			"Measures the session-TTL trade-off against a real chubbyd (see doc.go): for each TTL,\n"+
			"kill → next grant (lock-delay 0), false revocations per session-hour under pauses and\n"+
			"network jitter, and the master's CPU and KeepAlive rate per 1,000 sessions.\n\nflags:\n")
		fl.PrintDefaults()
	}
	ttls := ttlList(cfg.TTLs)
	fl.Var(&ttls, "ttls", "session TTLs to sweep, comma-separated durations")
	fl.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs per TTL, each with a fresh chubbyd; every reported point is the median over the runs")
	fl.IntVar(&cfg.Kills, "kills", cfg.Kills, "kill → grant measurements per run (the run's value is their median)")
	fl.BoolVar(&cfg.SkipKill, "skip-kill", cfg.SkipKill, "skip the kill → grant measurement")
	fl.IntVar(&cfg.Sessions, "sessions", cfg.Sessions, "sessions kept alive during the false-revocation run (0: skip it)")
	fl.IntVar(&cfg.Procs, "procs", cfg.Procs, "worker processes the sessions are spread over (each one is paused as a whole)")
	fl.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the false-revocation run, pauses included")
	fl.DurationVar(&cfg.Settle, "settle", cfg.Settle, "quiet time after the run before the counters are read")
	fl.DurationVar(&cfg.Jitter.Median, "jitter-median", cfg.Jitter.Median, "network jitter per chunk (lognormal): median (0: no jitter)")
	fl.DurationVar(&cfg.Jitter.P99, "jitter-p99", cfg.Jitter.P99, "network jitter: 99th percentile")
	fl.DurationVar(&cfg.Jitter.Max, "jitter-max", cfg.Jitter.Max, "network jitter: cap")
	fl.DurationVar(&cfg.PauseEvery, "pause-every", cfg.PauseEvery, "mean time between the pauses of one worker process, exponentially distributed (0: no pauses)")
	fl.DurationVar(&cfg.Pause.Median, "pause-median", cfg.Pause.Median, "pause length (lognormal): median")
	fl.DurationVar(&cfg.Pause.P99, "pause-p99", cfg.Pause.P99, "pause length: 99th percentile")
	fl.DurationVar(&cfg.Pause.Max, "pause-max", cfg.Pause.Max, "pause length: cap")
	fl.IntVar(&cfg.DialConcurrency, "dial-concurrency", cfg.DialConcurrency, "session creations in flight per worker")
	fl.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of every random choice (kill phases, pause schedule, jitter)")
	fl.StringVar(&cfg.Chubbyd, "chubbyd", cfg.Chubbyd, "a prebuilt chubbyd to measure (default: build ./cmd/chubbyd of this module)")
	fl.StringVar(&cfg.Out, "out", cfg.Out, "directory for ttl-sweep.csv, ttl-sweep-runs.csv and ttl-sweep.png")
	if err := fl.Parse(args); err != nil {
		return cfg, err
	}
	if fl.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	cfg.TTLs = ttls
	return cfg, cfg.Validate()
}

// run is the program without its process: flags, the sweep, the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ttlsweep: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := sweep(ctx, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "ttlsweep: %v\n", err)
		return 1
	}
	return 0
}
