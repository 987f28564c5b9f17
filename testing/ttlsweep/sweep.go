package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/proc"
)

// runRow is what one run of one TTL measured.
type runRow struct {
	TTL time.Duration
	Run int
	// GrantedTTL is the TTL the cell granted (the holder's, else the
	// workers').
	GrantedTTL time.Duration
	// Kills are the kill → grant measurements (none with -skip-kill).
	Kills []killResult
	// Load is the false-revocation run (nil with -sessions 0).
	Load     *loadResult
	Sessions int
}

// sweep runs the experiment cfg describes and writes its results.
func sweep(ctx context.Context, cfg config, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "ttlsweep-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := cfg.Chubbyd
	if bin == "" {
		fmt.Fprintln(out, "building ./cmd/chubbyd ...")
		dir := filepath.Join(tmp, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := proc.BuildCommands(dir, "./cmd/chubbyd"); err != nil {
			return fmt.Errorf("build chubbyd (run inside the module, or name a binary with -chubbyd): %w", err)
		}
		bin = filepath.Join(dir, "chubbyd")
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	printHeader(out, cfg, bin)
	var rows []runRow
	for ti, ttl := range cfg.TTLs {
		for run := 1; run <= cfg.Runs; run++ {
			seed := cfg.Seed*1_000_003 + uint64(ti)*1_000 + uint64(run)
			row, err := measureRun(ctx, cfg, bin, filepath.Join(tmp, fmt.Sprintf("ttl%d-run%d", ti, run)), ttl, run, seed)
			if err != nil {
				return fmt.Errorf("TTL %v, run %d: %w", ttl, run, err)
			}
			rows = append(rows, row)
			printRun(out, row)
			// Written after every run, so an interrupted sweep keeps what
			// it measured.
			if err := writeCSVs(cfg, rows); err != nil {
				return err
			}
		}
	}
	points := aggregate(cfg, rows)
	if err := writePlot(filepath.Join(cfg.Out, plotFile), cfg, rows, points); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	printSummary(out, cfg, rows, points)
	return nil
}

// measureRun measures one TTL once against a fresh chubbyd with its own
// data directory: first kill → grant, then the false-revocation run.
func measureRun(ctx context.Context, cfg config, bin, dir string, ttl time.Duration, run int, seed uint64) (runRow, error) {
	row := runRow{TTL: ttl, Run: run, Sessions: cfg.Sessions}
	defer os.RemoveAll(dir)
	srv, err := startChubbyd(ctx, bin, dir)
	if err != nil {
		return row, err
	}
	defer srv.stop()
	if !cfg.SkipKill {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		waiter, err := client.Dial(dctx, client.Config{Servers: []string{srv.rpcAddr}})
		cancel()
		if err != nil {
			return row, fmt.Errorf("waiter: %w", err)
		}
		r := newRand(seed, 0)
		for k := range cfg.Kills {
			res, err := measureKill(ctx, srv, waiter, dir, fmt.Sprintf("/ls/local/ttlsweep-kill-%d", k), ttl, r)
			if err != nil {
				waiter.Close()
				return row, fmt.Errorf("kill → grant: %w", err)
			}
			row.Kills = append(row.Kills, res)
			row.GrantedTTL = res.GrantedTTL
		}
		waiter.Close()
	}
	if cfg.Sessions > 0 {
		load, err := measureLoad(ctx, cfg, srv, dir, ttl, seed)
		if err != nil {
			return row, fmt.Errorf("sessions under pauses and jitter: %w", err)
		}
		row.Load = &load
		if row.GrantedTTL == 0 {
			row.GrantedTTL = load.GrantedTTL
		}
	}
	return row, nil
}

// killToGrant is the run's kill → grant: the median of its measurements
// (NaN if none).
func (r runRow) killToGrant() float64 {
	vs := make([]float64, len(r.Kills))
	for i, k := range r.Kills {
		vs[i] = k.KillToGrant.Seconds()
	}
	return median(vs)
}

// late is kill → grant beyond the granted TTL.
func (r runRow) late() float64 { return r.killToGrant() - r.GrantedTTL.Seconds() }

// sessionHours is the session-time the false-revocation run exposed.
func (r runRow) sessionHours() float64 {
	if r.Load == nil {
		return math.NaN()
	}
	return float64(r.Sessions) * r.Load.Window.Hours()
}

// falseRate is false revocations (the master's count) per session-hour.
func (r runRow) falseRate() float64 {
	if r.Load == nil {
		return math.NaN()
	}
	return float64(r.Load.ServerExpiries) / r.sessionHours()
}

func (r runRow) jeopardyRate() float64 {
	if r.Load == nil {
		return math.NaN()
	}
	return float64(r.Load.Jeopardies) / r.sessionHours()
}

// perThousand scales a per-second quantity of the run to 1,000 sessions.
func (r runRow) perThousand(total float64) float64 {
	if r.Load == nil {
		return math.NaN()
	}
	return total / r.Load.Window.Seconds() / (float64(r.Sessions) / 1000)
}

// cpuPer1000 is master CPU-seconds per second per 1,000 sessions.
func (r runRow) cpuPer1000() float64 {
	if r.Load == nil {
		return math.NaN()
	}
	return r.perThousand(r.Load.CPUSeconds)
}

// keepAlivesPer1000 is KeepAlive calls per second per 1,000 sessions.
func (r runRow) keepAlivesPer1000() float64 {
	if r.Load == nil {
		return math.NaN()
	}
	return r.perThousand(r.Load.KeepAlives)
}

// point is one TTL's result: medians over its runs.
type point struct {
	TTL, GrantedTTL                  time.Duration
	KillToGrant, Late                float64
	FalseRate, CPUPer1000, KAPer1000 float64
	// JeopardyRate is the median of the runs' client jeopardies per
	// session-hour: sessions whose local lease ran out before a renewal
	// came (their locks were reported possibly lost), expired or not.
	JeopardyRate float64
	// Expiries is the total count of false revocations over all runs;
	// SessionHours the total exposure.
	Expiries       int
	ClientExpiries int
	SessionHours   float64
	Window         float64
	Runs           int
}

func aggregate(cfg config, rows []runRow) []point {
	var pts []point
	for _, ttl := range cfg.TTLs {
		var granted, k2g, late, rate, jeop, cpu, ka, window []float64
		p := point{TTL: ttl}
		for _, r := range rows {
			if r.TTL != ttl {
				continue
			}
			p.Runs++
			granted = append(granted, r.GrantedTTL.Seconds())
			k2g = append(k2g, r.killToGrant())
			late = append(late, r.late())
			rate = append(rate, r.falseRate())
			jeop = append(jeop, r.jeopardyRate())
			cpu = append(cpu, r.cpuPer1000())
			ka = append(ka, r.keepAlivesPer1000())
			if r.Load != nil {
				window = append(window, r.Load.Window.Seconds())
				p.Expiries += r.Load.ServerExpiries
				p.ClientExpiries += r.Load.ClientExpiries
				p.SessionHours += r.sessionHours()
			}
		}
		if p.Runs == 0 {
			continue
		}
		p.GrantedTTL = time.Duration(median(granted) * float64(time.Second))
		p.KillToGrant, p.Late = median(k2g), median(late)
		p.FalseRate, p.CPUPer1000, p.KAPer1000 = median(rate), median(cpu), median(ka)
		p.JeopardyRate = median(jeop)
		p.Window = median(window)
		pts = append(pts, p)
	}
	return pts
}
