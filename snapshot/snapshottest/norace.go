//go:build !race

package snapshottest

const raceEnabled = false
