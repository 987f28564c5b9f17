package main

// What the sweep writes: two CSV files and the text on stdout.

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The output files, in config.Out.
const (
	pointsFile = "ttl-sweep.csv"
	runsFile   = "ttl-sweep-runs.csv"
	plotFile   = "ttl-sweep.png"
)

// pointColumns are the columns of ttl-sweep.csv, one row per TTL.
var pointColumns = []string{"ttl_s", "ttl_granted_s", "kill_to_grant_s_median", "late_s_median",
	"false_revocations_per_session_hour", "master_cpu_per_1000_sessions", "keepalives_per_s_per_1000_sessions",
	"sessions", "duration_s", "runs", "jeopardies_per_session_hour"}

// runColumns are the columns of ttl-sweep-runs.csv, one row per run.
var runColumns = []string{"ttl_s", "run", "ttl_granted_s", "kill_to_grant_s", "late_s", "kill_to_grant_s_all",
	"kill_phase_s_all", "sessions", "window_s", "session_hours", "server_expiries", "client_expiries", "jeopardies",
	"false_revocations_per_session_hour", "master_cpu_s", "master_cpu_per_1000_sessions", "master_cpu_idle_s_per_s", "keepalives",
	"keepalives_per_s_per_1000_sessions", "sessions_gauge_start", "sessions_gauge_end", "host_cpu_busy",
	"pauses", "pause_p50_s", "pause_p99_s", "pause_max_s", "jitter_samples", "jitter_p50_s", "jitter_p99_s", "jitter_max_s"}

// saturated is the machine's busy fraction above which a run is flagged.
const saturated = 0.9

// num formats a value for a CSV file; NaN (not measured) is empty.
func num(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func secs(d time.Duration) string { return num(d.Seconds()) }

func writeCSVs(cfg config, rows []runRow) error {
	var pts [][]string
	for _, p := range aggregate(cfg, rows) {
		pts = append(pts, []string{secs(p.TTL), secs(p.GrantedTTL), num(p.KillToGrant), num(p.Late),
			num(p.FalseRate), num(p.CPUPer1000), num(p.KAPer1000), strconv.Itoa(cfg.Sessions), num(p.Window),
			strconv.Itoa(p.Runs), num(p.JeopardyRate)})
	}
	if err := writeCSV(filepath.Join(cfg.Out, pointsFile), pointColumns, pts); err != nil {
		return err
	}
	var runs [][]string
	for _, r := range rows {
		var all, phases []string
		for _, k := range r.Kills {
			all = append(all, secs(k.KillToGrant))
			phases = append(phases, secs(k.Phase))
		}
		rec := []string{secs(r.TTL), strconv.Itoa(r.Run), secs(r.GrantedTTL), num(r.killToGrant()), num(r.late()),
			strings.Join(all, ";"), strings.Join(phases, ";"), strconv.Itoa(r.Sessions)}
		if l := r.Load; l != nil {
			rec = append(rec, secs(l.Window), num(r.sessionHours()), strconv.Itoa(l.ServerExpiries),
				strconv.Itoa(l.ClientExpiries), strconv.Itoa(l.Jeopardies), num(r.falseRate()), num(l.CPUSeconds),
				num(r.cpuPer1000()), num(l.IdleCPU), num(l.KeepAlives), num(r.keepAlivesPer1000()), num(l.SessionsStart),
				num(l.SessionsEnd), num(l.HostBusy), strconv.FormatInt(l.Pauses.N, 10), secs(l.Pauses.P50), secs(l.Pauses.P99),
				secs(l.Pauses.Max), strconv.FormatInt(l.Jitter.N, 10), secs(l.Jitter.P50), secs(l.Jitter.P99),
				secs(l.Jitter.Max))
		}
		for len(rec) < len(runColumns) {
			rec = append(rec, "")
		}
		runs = append(runs, rec)
	}
	return writeCSV(filepath.Join(cfg.Out, runsFile), runColumns, runs)
}

// writeCSV replaces path with the header and records.
func writeCSV(path string, header []string, records [][]string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(header)
	w.WriteAll(records) // flushes
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func printHeader(out io.Writer, cfg config, bin string) {
	fmt.Fprintf(out, "ttlsweep: chubbyd %s\n", bin)
	ttls := ttlList(cfg.TTLs)
	fmt.Fprintf(out, "  TTLs %s, %d run(s) each (fresh chubbyd per run), seed %d\n", ttls.String(), cfg.Runs, cfg.Seed)
	if !cfg.SkipKill {
		fmt.Fprintf(out, "  (a) kill → grant: %d kill(s) per run, lock-delay 0, kill at a uniform phase in [0, TTL)\n", cfg.Kills)
	}
	if cfg.Sessions > 0 {
		fmt.Fprintf(out, "  (b) %d sessions in %d worker processes for %v (+%v settle), through a proxy with jitter: ",
			cfg.Sessions, cfg.Procs, cfg.Duration, cfg.Settle)
		if cfg.Jitter.Median > 0 {
			fmt.Fprintf(out, "%v\n", cfg.Jitter)
		} else {
			fmt.Fprintf(out, "none\n")
		}
		if cfg.PauseEvery > 0 {
			fmt.Fprintf(out, "      pauses: every %v on average per process (exponential), length %v\n", cfg.PauseEvery, cfg.Pause)
		} else {
			fmt.Fprintf(out, "      pauses: none\n")
		}
	}
	var est time.Duration
	for _, ttl := range cfg.TTLs {
		per := 3 * time.Second // chubbyd start and stop
		if !cfg.SkipKill {
			per += time.Duration(cfg.Kills) * (ttl*3/2 + time.Second)
		}
		if cfg.Sessions > 0 {
			per += idleBaseline + cfg.Duration + cfg.Settle + 5*time.Second
		}
		est += time.Duration(cfg.Runs) * per
	}
	fmt.Fprintf(out, "  expect roughly %v; results in %s\n\n", est.Round(time.Second), cfg.Out)
}

func printRun(out io.Writer, r runRow) {
	fmt.Fprintf(out, "TTL %v run %d: granted %v", r.TTL, r.Run, r.GrantedTTL)
	if len(r.Kills) > 0 {
		fmt.Fprintf(out, "; kill→grant %.3fs (late %+.3fs)", r.killToGrant(), r.late())
	}
	if l := r.Load; l != nil {
		fmt.Fprintf(out, "; %d false revocations (workers saw %d, %d jeopardies) in %.1fs × %d sessions = %.3g/session-h;"+
			" master CPU %.3g s/s per 1000 (idle %.3g s/s); %.4g KeepAlives/s per 1000; sessions %.0f→%.0f\n"+
			"    pauses %v; jitter %v; machine %.0f%% busy",
			l.ServerExpiries, l.ClientExpiries, l.Jeopardies, l.Window.Seconds(), r.Sessions, r.falseRate(),
			r.cpuPer1000(), l.IdleCPU, r.keepAlivesPer1000(), l.SessionsStart, l.SessionsEnd, l.Pauses, l.Jitter,
			100*l.HostBusy)
		if l.HostBusy > saturated {
			fmt.Fprintf(out, "\n    WARNING: the machine was %.0f%% busy (this sweep and whatever else runs on it):"+
				" KeepAlives wait for a CPU, so expiries here measure the machine as much as the TTL", 100*l.HostBusy)
		}
	}
	fmt.Fprintln(out)
}

// fmtv prints v with format, or "-" if it was not measured.
func fmtv(format string, v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func printSummary(out io.Writer, cfg config, rows []runRow, pts []point) {
	fmt.Fprintf(out, "\nmedians over %d run(s) per TTL:\n", cfg.Runs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TTL\tgranted\tkill→grant s\tlate s\tfalse rev.\tper session-h\tCPU s/s /1000\tKA/s /1000\tpause p50/p99\tjitter p50/p99\t")
	for _, p := range pts {
		var pause50, pause99, jit50, jit99 []float64
		for _, r := range rows {
			if r.TTL == p.TTL && r.Load != nil {
				pause50, pause99 = append(pause50, float64(r.Load.Pauses.P50)), append(pause99, float64(r.Load.Pauses.P99))
				jit50, jit99 = append(jit50, float64(r.Load.Jitter.P50)), append(jit99, float64(r.Load.Jitter.P99))
			}
		}
		fmt.Fprintf(tw, "%v\t%v\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", p.TTL, p.GrantedTTL,
			fmtv("%.3f", p.KillToGrant), fmtv("%+.3f", p.Late), p.Expiries, fmtv("%.3g", p.FalseRate),
			fmtv("%.3g", p.CPUPer1000), fmtv("%.4g", p.KAPer1000), pair(pause50, pause99), pair(jit50, jit99))
	}
	tw.Flush()
	if cfg.Sessions > 0 {
		fmt.Fprintln(out)
		for _, p := range pts {
			fmt.Fprintf(out, "TTL %v: %d false revocation(s) (the workers saw %d) in %.3g session-hours (%d sessions, %d run(s) of %.0fs)\n",
				p.TTL, p.Expiries, p.ClientExpiries, p.SessionHours, cfg.Sessions, p.Runs, p.Window)
		}
	}
	fmt.Fprintf(out, "\nwrote %s, %s, %s\n", filepath.Join(cfg.Out, pointsFile), filepath.Join(cfg.Out, runsFile),
		filepath.Join(cfg.Out, plotFile))
}

// pair prints the medians of two lists of durations (in nanoseconds) as
// "p50/p99", or "-" if there are none.
func pair(a, b []float64) string {
	if len(a) == 0 {
		return "-"
	}
	return ms(time.Duration(median(a))) + "/" + ms(time.Duration(median(b)))
}
