//go:build race

package snapshottest

// raceEnabled: the race detector slows the transpiled SQLite engine about
// a hundredfold, so load tests shrink their workload under it.
const raceEnabled = true
