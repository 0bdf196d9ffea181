//go:build race

package snapshot_test

// raceEnabled: the race detector slows the transpiled SQLite engine about
// a hundredfold, so load tests shrink their workload under it.
const raceEnabled = true
