package main

// -server-metrics: what the measured window cost the server, read from its
// Prometheus endpoint (chubbyd -http-addr .../metrics): the process's CPU
// seconds and resident memory, sampled as the window opens and closes.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// usageSample is a server's process figures at one moment.
type usageSample struct {
	at       time.Time
	cpu, rss float64 // seconds, bytes
}

// sampleServer reads process_cpu_seconds_total and
// process_resident_memory_bytes from a Prometheus text endpoint.
func sampleServer(ctx context.Context, url string) (usageSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usageSample{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return usageSample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return usageSample{}, fmt.Errorf("%s: %s", url, resp.Status)
	}
	s := usageSample{at: time.Now()}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		var dst *float64
		switch name {
		case "process_cpu_seconds_total":
			dst = &s.cpu
		case "process_resident_memory_bytes":
			dst = &s.rss
		}
		if !ok || dst == nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return usageSample{}, fmt.Errorf("%s: %s: %v", url, name, err)
		}
		*dst = v
		found++
	}
	if err := sc.Err(); err != nil {
		return usageSample{}, err
	}
	if found != 2 {
		return usageSample{}, fmt.Errorf("%s: no process_cpu_seconds_total and process_resident_memory_bytes (is it a chubbyd /metrics?)", url)
	}
	return s, nil
}

// serverUsage samples the server at the start and at the end of a window.
type serverUsage struct {
	url        string
	start, end usageSample
	err        error
}

// begin and finish sample the server as the window opens and closes (nil:
// no -server-metrics, nothing to do).
func (u *serverUsage) begin() {
	if u != nil && u.err == nil {
		u.start, u.err = sampleServer(context.Background(), u.url)
	}
}

func (u *serverUsage) finish() {
	if u != nil && u.err == nil {
		u.end, u.err = sampleServer(context.Background(), u.url)
	}
}

// figures reports the window's server CPU and the server's memory at its
// end; a sample that failed is an error of the run.
func (u *serverUsage) figures() ([]Figure, error) {
	if u == nil {
		return nil, nil
	}
	if u.err != nil {
		return nil, fmt.Errorf("-server-metrics: %w", u.err)
	}
	secs := u.end.at.Sub(u.start.at).Seconds()
	return []Figure{
		{"server_cpu_cores", (u.end.cpu - u.start.cpu) / secs, "the server's CPU over the measured window (-server-metrics), in cores"},
		{"server_rss_mb", u.end.rss / 1e6, "the server's resident memory at the window's end, in MB"},
	}, nil
}
