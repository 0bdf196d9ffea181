package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config is one bench run's settings (flags of reconciler-bench).
type Config struct {
	AdminURL string `json:"-"` // PostgreSQL admin URL (RECONCILER_TEST_DATABASE_URL); never written out
	Sizes    []int  // row counts
	Runs     int    // repeated windows/runs per figure (medians)
	OutDir   string // where results.md and the PNGs go
	Redis    string // host:port of Redis for the push-lane comparison
	Command  string // the command that reproduces the run, for the report

	IdleInterval   time.Duration // poll interval while measuring idle cost
	IdleWindow     time.Duration // one idle measuring window
	ChangeInterval time.Duration // poll.interval of the change-latency runs
	Changes        int           // changes timed per mode and size
	DropChanges    int           // changes of the 1%-drop comparison
	DropRate       float64       // fraction of push messages dropped
	Seed           uint64        // RNG seed (drops, keys, pauses)
	FleetSizes     []int         // reconcilers polling one database
	FleetRows      int           // rows of the fleet database
	FleetInterval  time.Duration // their poll interval
	FleetWindow    time.Duration // one fleet measuring window
	ColdMaxRows    int           // cold start is measured up to this size
	RenderOnly     bool          // re-render the report from results.json
}

// ParseSizes reads "1k,10k,100k,1M".
func ParseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"), strings.HasSuffix(f, "K"):
			mult, f = 1000, f[:len(f)-1]
		case strings.HasSuffix(f, "M"), strings.HasSuffix(f, "m"):
			mult, f = 1_000_000, f[:len(f)-1]
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes in %q", s)
	}
	return out, nil
}

// sizeName prints 1000 as 1k and 1000000 as 1M.
func sizeName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}
