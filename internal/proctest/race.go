//go:build race

package proctest

// raceEnabled is set when the tests run with -race: the daemon binary they
// start is then built with -race too, so that a data race in it fails the
// test that provoked it.
const raceEnabled = true
