//go:build race

package wire

// raceEnabled: the race detector makes sync.Pool drop a share of what is
// put back (on purpose), so allocation counts that rely on a pool do not
// hold under -race.
const raceEnabled = true
