package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// z99 is the 99th percentile of the standard normal distribution.
const z99 = 2.3263478740408408

// logNormal is a lognormal distribution of durations given the way people
// quote latencies, by its median and 99th percentile, and capped: a sample
// is min(Max, exp(N(ln median, σ))) with σ = ln(p99/median)/z99.
type logNormal struct {
	Median, P99, Max time.Duration
}

// Validate says what is wrong with the parameters, naming them.
func (d logNormal) Validate(name string) error {
	switch {
	case d.Median <= 0:
		return fmt.Errorf("%s median %v: must be positive", name, d.Median)
	case d.P99 < d.Median:
		return fmt.Errorf("%s p99 %v: must not be below the median %v", name, d.P99, d.Median)
	case d.Max < d.Median:
		return fmt.Errorf("%s max %v: must not be below the median %v", name, d.Max, d.Median)
	}
	return nil
}

func (d logNormal) sigma() float64 {
	return math.Log(float64(d.P99)/float64(d.Median)) / z99
}

// Sample draws one duration with r.
func (d logNormal) Sample(r *rand.Rand) time.Duration {
	v := float64(d.Median) * math.Exp(d.sigma()*r.NormFloat64())
	if v >= float64(d.Max) {
		return d.Max
	}
	return time.Duration(v)
}

func (d logNormal) String() string {
	return fmt.Sprintf("lognormal median %v p99 %v (σ %.2f) capped at %v", d.Median, d.P99, d.sigma(), d.Max)
}

// exponential draws an exponentially distributed duration of the given mean.
func exponential(r *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(mean))
}

// newRand is a generator for one purpose (stream) of a run seeded with seed:
// the same seed gives every purpose the same sequence again.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

// histogram counts durations in buckets 1 % wide (from 1 µs up), enough to
// read percentiles of millions of samples in constant memory. It is safe
// for concurrent use.
type histogram struct {
	mu     sync.Mutex
	counts map[int]int64
	n      int64
	max    time.Duration
}

const histGrowth = 1.01

func newHistogram() *histogram { return &histogram{counts: map[int]int64{}} }

// bucket 0 holds everything under 1 µs; bucket i ≥ 1 holds
// [1µs·1.01^(i-1), 1µs·1.01^i).
func histBucket(d time.Duration) int {
	if d < time.Microsecond {
		return 0
	}
	return 1 + int(math.Log(float64(d)/float64(time.Microsecond))/math.Log(histGrowth))
}

// histUpper is the upper bound of bucket i.
func histUpper(i int) time.Duration {
	if i == 0 {
		return time.Microsecond
	}
	return time.Duration(float64(time.Microsecond) * math.Pow(histGrowth, float64(i)))
}

// Add records d.
func (h *histogram) Add(d time.Duration) {
	b := histBucket(d)
	h.mu.Lock()
	h.counts[b]++
	h.n++
	h.max = max(h.max, d)
	h.mu.Unlock()
}

// Summary is what a histogram says about its samples.
type Summary struct {
	N             int64
	P50, P99, Max time.Duration
}

// Summary reads the 50th and 99th percentiles (each within 1 %, never above
// Max) and the maximum.
func (h *histogram) Summary() Summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Summary{N: h.n, Max: h.max}
	if h.n == 0 {
		return s
	}
	keys := make([]int, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	quantile := func(q float64) time.Duration {
		rank := int64(math.Ceil(q * float64(h.n)))
		var seen int64
		for _, k := range keys {
			if seen += h.counts[k]; seen >= rank {
				return min(histUpper(k), h.max)
			}
		}
		return h.max
	}
	s.P50, s.P99 = quantile(0.50), quantile(0.99)
	return s
}

func (s Summary) String() string {
	if s.N == 0 {
		return "none"
	}
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", s.N, ms(s.P50), ms(s.P99), ms(s.Max))
}

// ms formats d in milliseconds with a sensible precision.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 100:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.0fms", v)
}

// sampler draws from a distribution for many goroutines at once (a
// netproxy jitter function) and records every sample it hands out.
type sampler struct {
	mu   sync.Mutex
	r    *rand.Rand
	dist logNormal
	hist *histogram
}

func newSampler(dist logNormal, r *rand.Rand) *sampler {
	return &sampler{r: r, dist: dist, hist: newHistogram()}
}

// Sample draws one duration and records it.
func (s *sampler) Sample() time.Duration {
	s.mu.Lock()
	d := s.dist.Sample(s.r)
	h := s.hist
	s.mu.Unlock()
	h.Add(d)
	return d
}

// Reset forgets the samples recorded so far.
func (s *sampler) Reset() {
	s.mu.Lock()
	s.hist = newHistogram()
	s.mu.Unlock()
}

// Summary describes the samples recorded since the last Reset.
func (s *sampler) Summary() Summary {
	s.mu.Lock()
	h := s.hist
	s.mu.Unlock()
	return h.Summary()
}

// median is the median of vs (the mean of the middle two for an even
// count); NaN for none. NaN values are left out.
func median(vs []float64) float64 {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}
