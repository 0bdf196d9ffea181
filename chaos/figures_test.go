package chaos

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// figures are the suite's results: what was done, what was injected and
// what was found.
type figures struct {
	mu         sync.Mutex
	started    time.Time
	writes     int64 // committed writes the daemons had to apply
	rolledBack int64 // writes rolled back (must never show)
	faults     map[string]int
	converge   map[string][]time.Duration
	missed     int // rows whose revision never reached a daemon
	diverged   int // entries left differing from the rows (any field checked)
	leaked     int // datasource connections beyond what live daemons hold
	panics     int
	canaryHits int
	requests   int64 // HTTP requests made to daemons
	scenarios  []string
}

func newFigures() *figures {
	return &figures{started: time.Now(), faults: map[string]int{}, converge: map[string][]time.Duration{}}
}

func (f *figures) with(fn func(f *figures)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *figures) scenario(name string) {
	f.with(func(f *figures) { f.scenarios = append(f.scenarios, name) })
}
func (f *figures) wrote(n int64)  { f.with(func(f *figures) { f.writes += n }) }
func (f *figures) rolled(n int64) { f.with(func(f *figures) { f.rolledBack += n }) }
func (f *figures) request()       { f.with(func(f *figures) { f.requests++ }) }

// fault records one injected fault of a type.
func (f *figures) fault(kind string) { f.with(func(f *figures) { f.faults[kind]++ }) }

// converged records how long convergence took after a fault of a type.
func (f *figures) converged(kind string, d time.Duration) {
	f.with(func(f *figures) { f.converge[kind] = append(f.converge[kind], d) })
}

func (f *figures) ran() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.scenarios) > 0
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// markdown renders the figures as the README's results table.
func (f *figures) markdown(long bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	form := "short (`go test ./chaos/`)"
	if long {
		form = "long (`make chaos`)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Chaos results\n\nForm: %s · %d scenarios · %s · %d CPUs · %s wall time\n\n",
		form, len(f.scenarios), runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), time.Since(f.started).Round(time.Second))
	b.WriteString("| figure | value |\n|---|---|\n")
	total := 0
	for _, n := range f.faults {
		total += n
	}
	rows := []struct {
		k string
		v any
	}{
		{"writes applied (committed row changes)", f.writes},
		{"writes rolled back (never applied)", f.rolledBack},
		{"faults injected", total},
		{"HTTP requests to daemons", f.requests},
		{"changes missed", f.missed},
		{"items left diverged", f.diverged},
		{"leaked instances", f.leaked},
		{"panics", f.panics},
		{"canary hits", f.canaryHits},
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %v |\n", r.k, r.v)
	}
	b.WriteString("\n| fault | injected | converged after: median | max |\n|---|---|---|---|\n")
	kinds := make([]string, 0, len(f.faults))
	for k := range f.faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		ds := f.converge[k]
		var mx time.Duration
		for _, d := range ds {
			mx = max(mx, d)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", k, f.faults[k], round(median(ds)), round(mx))
	}
	b.WriteString("\nConverged = every daemon's `/v1/items` equals, item by item (kind, key, revision and the expected state), what the store's rows desire; measured from the end of the fault to the first poll of `/v1/items` that shows it.\n")
	return b.String()
}
