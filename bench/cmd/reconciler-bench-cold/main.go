// Command reconciler-bench-cold measures the cold start alone: rows seeded
// into a database beside RECONCILER_TEST_DATABASE_URL, then relist and
// materialize every entry (no-op engine) to the first full sync. With
// -cpuprofile it writes the profile of the measured starts.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/objectstack-fleet/reconciler/bench"
)

func main() { bench.Main("reconciler-bench-cold", run) }

func run(ctx context.Context) error {
	var cfg bench.ColdConfig
	rows := flag.String("rows", "100k", "sys_metadata rows (k, M suffixes)")
	flag.IntVar(&cfg.Runs, "runs", 1, "cold starts in this process (the first is the cold one)")
	flag.BoolVar(&cfg.Reuse, "reuse", false, "reuse a database seeded by an earlier run of the same size")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the measured starts to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile (after the measured starts) to this file")
	flag.Parse()
	cfg.AdminURL = os.Getenv("RECONCILER_TEST_DATABASE_URL")
	if cfg.AdminURL == "" {
		return fmt.Errorf("RECONCILER_TEST_DATABASE_URL is not set: point it at a PostgreSQL admin URL")
	}
	n, err := bench.ParseSizes(*rows)
	if err != nil {
		return err
	}
	cfg.Rows = n[0]
	if *profile != "" {
		// Seed first so that the profile holds the start only.
		c := cfg
		c.Runs = 0
		if _, err := bench.RunCold(ctx, c, func(string, ...any) {}); err != nil {
			return err
		}
		cfg.Reuse = true
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	log := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	if _, err = bench.RunCold(ctx, cfg, log); err != nil {
		return err
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		return pprof.Lookup("allocs").WriteTo(f, 0)
	}
	return nil
}
