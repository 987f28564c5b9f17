//go:build !linux

package procnemesis

import "time"

// MonoNow falls back to the wall clock where CLOCK_MONOTONIC is not read
// the same way: shared by every process, but it may be stepped.
func MonoNow() int64 { return time.Now().UnixNano() }
