// Package bench holds the Go benchmarks of a one-server cell: a real
// chubbyd server in-process (raft log on bbolt with fsync on, real TCP on
// loopback) driven by real clients. Run them with
//
//	go test ./testing/bench -run '^$' -bench . -benchtime 3s -count 5
//
// Each benchmark reports ops/s and latency percentiles as custom metrics.
package bench
