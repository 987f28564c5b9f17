package procnemesis

import "golang.org/x/sys/unix"

// MonoNow is CLOCK_MONOTONIC in nanoseconds: one clock for every process
// on the machine, never stepped, so the lock clients' histories (taken in
// their own processes) and the test's line up on one time base.
func MonoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}
