package core

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"
)

// Plan is which fault schedules a run plays: a seed each, and how long
// each lasts. Both nemeses (this package and testing/procnemesis) read it
// from the same environment variables.
type Plan struct {
	Seeds    []uint64
	Duration time.Duration
	Long     bool // CHUBBY_NEMESIS_LONG=1
	Explicit bool // CHUBBY_NEMESIS_SEED or CHUBBY_NEMESIS_SCHEDULES chose the seeds
}

// PlanFromEnv returns the plan the environment asks for, given the short
// run's fixed seeds and length (what `go test` plays by default):
//   - CHUBBY_NEMESIS_LONG=1: 20 schedules of 60 s with random seeds;
//   - CHUBBY_NEMESIS_SCHEDULES=N, CHUBBY_NEMESIS_SECONDS=S: N schedules of
//     S seconds (the short seeds first, then 1, 2, ... not among them; in
//     the long run random ones);
//   - CHUBBY_NEMESIS_SEED=N: seed N only (to replay a failure).
func PlanFromEnv(short []uint64, shortDur time.Duration) (Plan, error) {
	p := Plan{Seeds: append([]uint64(nil), short...), Duration: shortDur}
	n := len(short)
	if os.Getenv("CHUBBY_NEMESIS_LONG") == "1" {
		p.Long, p.Duration, n = true, 60*time.Second, 20
	}
	if v := os.Getenv("CHUBBY_NEMESIS_SCHEDULES"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			return Plan{}, fmt.Errorf("CHUBBY_NEMESIS_SCHEDULES=%q: want a positive count", v)
		}
		n, p.Explicit = k, true
	}
	if v := os.Getenv("CHUBBY_NEMESIS_SECONDS"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 3 {
			return Plan{}, fmt.Errorf("CHUBBY_NEMESIS_SECONDS=%q: want a count of seconds, at least 3", v)
		}
		p.Duration = time.Duration(k) * time.Second
	}
	switch {
	case os.Getenv("CHUBBY_NEMESIS_SEED") != "":
		v := os.Getenv("CHUBBY_NEMESIS_SEED")
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Plan{}, fmt.Errorf("CHUBBY_NEMESIS_SEED=%q: %v", v, err)
		}
		p.Seeds, p.Explicit = []uint64{s}, true
	case p.Long:
		p.Seeds = nil
		for range n {
			p.Seeds = append(p.Seeds, rand.Uint64()%1_000_000_000)
		}
	default:
		for next := uint64(1); len(p.Seeds) < n; next++ {
			if !slices.Contains(p.Seeds, next) {
				p.Seeds = append(p.Seeds, next)
			}
		}
		p.Seeds = p.Seeds[:n]
	}
	return p, nil
}
