package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// PollCostConfig configures RunPollCost.
type PollCostConfig struct {
	Entries      int    // journal entries, one transaction each
	Transactions int    // pgbench transactions per run
	Rounds       int    // alternated rounds (medians)
	OutDir       string // where poll.md and poll.json go
	Command      string // how the run was started, for the report
}

// PollStatement is one statement pgbench ran, with its server CPU per
// call in each round.
type PollStatement struct {
	Name   string
	SQL    string
	PerUS  []float64 // server CPU per call (µs), one per round
	Median float64
	Ratio  float64 // Median over SELECT 1's median in the same mode
}

// PollCostMode is one connection mode's statements.
type PollCostMode struct {
	Mode       string // pgbench -M: prepared or simple
	Statements []PollStatement
}

// PollCostResult is what RunPollCost measured.
type PollCostResult struct {
	Config PollCostConfig
	Start  time.Time
	Modes  []PollCostMode
}

// pollStatements are the statements compared, SELECT 1 first. {cur} and
// {moved} are the cursor's snapshot: the current one for an idle poll of a quiet
// store, one taken before unrelated writes (as other replicas' heartbeats
// in a fleet) for a poll whose snapshot moved with nothing new for it.
var pollStatements = []struct{ name, sql string }{
	{"SELECT 1", "SELECT 1;"},
	{"idle poll (v7)", "SELECT sys_reconciler_poll_since('{cur}'), now();"},
	{"idle poll before v7 (v3)", "SELECT * FROM sys_reconciler_poll('{cur}');"},
	{"poll, snapshot moved, nothing new (v7)", "SELECT sys_reconciler_poll_since('{moved}'), now();"},
	{"poll, snapshot moved, nothing new (v3)", "SELECT * FROM sys_reconciler_poll('{moved}');"},
}

// RunPollCost measures the server CPU of one idle poll against a
// `SELECT 1`: pgbench, one client per statement, in both connection modes
// (prepared statements, and the simple protocol a transaction-mode pooler
// such as PgBouncer leaves), on a private cluster it starts, with a
// journal of cfg.Entries entries. Each statement's CPU is the postmaster's
// counters of its reaped children (cutime + cstime of /proc/PID/stat),
// read before the pgbench run and after its backend has exited and been
// reaped, so it is exactly that backend's CPU (its connection start
// included, about 1 ms in a run of cfg.Transactions calls). Rounds run the
// statements alternately; figures are medians.
func RunPollCost(ctx context.Context, cfg PollCostConfig, log *slog.Logger) (PollCostResult, error) {
	res := PollCostResult{Config: cfg, Start: time.Now()}
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		return res, errors.New("pgbench not found: apt-get install postgresql-contrib (or postgresql-client)")
	}
	// Autovacuum off and no pg_stat_statements: nothing else forks or
	// hooks in while the counters are read.
	c, err := startPrimaryConf(20, "autovacuum = off\n")
	if err != nil {
		return res, err
	}
	defer c.remove()
	url := c.url("postgres")
	s, err := snapshot.Open(url, snapshot.OpenOptions{})
	if err != nil {
		return res, err
	}
	err = s.Migrate(ctx)
	s.Close()
	if err != nil {
		return res, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	log.Info("poll cost: seeding the journal", slog.Int("entries", cfg.Entries))
	for i := range cfg.Entries {
		if _, err := conn.Exec(ctx, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, 'object', $1, '{}')`,
			"o"+strconv.Itoa(i)); err != nil {
			return res, fmt.Errorf("seed: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return res, err
	}
	var moved string
	if err := conn.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&moved); err != nil {
		return res, err
	}
	// Unrelated writes: the snapshot moves past moved with no journal entry.
	for range 5 {
		if _, err := conn.Exec(ctx, "UPDATE sys_reconciler_state SET pruned_at = pruned_at WHERE id = 1"); err != nil {
			return res, err
		}
	}
	pm, err := c.postmaster()
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "reconciler-pollcost-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	for _, mode := range []string{"prepared", "simple"} {
		m := PollCostMode{Mode: mode}
		for _, st := range pollStatements {
			m.Statements = append(m.Statements, PollStatement{Name: st.name, SQL: st.sql})
		}
		res.Modes = append(res.Modes, m)
	}
	for round := range cfg.Rounds {
		for mi := range res.Modes {
			m := &res.Modes[mi]
			for si := range m.Statements {
				st := &m.Statements[si]
				var cur string
				if err := conn.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&cur); err != nil {
					return res, err
				}
				file := filepath.Join(dir, fmt.Sprintf("s%d.sql", si))
				if err := os.WriteFile(file, []byte(strings.NewReplacer("{cur}", cur, "{moved}", moved).Replace(st.SQL)+"\n"), 0o644); err != nil {
					return res, err
				}
				us, err := pgbenchCPU(ctx, pgbench, c, pm, m.Mode, file, cfg.Transactions)
				if err != nil {
					return res, fmt.Errorf("%s, %s: %w", st.Name, m.Mode, err)
				}
				st.PerUS = append(st.PerUS, us)
				log.Info("poll cost", slog.Int("round", round+1), slog.String("mode", m.Mode), slog.String("statement", st.Name),
					slog.Float64("server_us_per_call", us))
			}
		}
	}
	for mi := range res.Modes {
		m := &res.Modes[mi]
		for si := range m.Statements {
			m.Statements[si].Median = median(m.Statements[si].PerUS)
		}
		for si := range m.Statements {
			m.Statements[si].Ratio = m.Statements[si].Median / m.Statements[0].Median
		}
	}
	return res, writePollCost(cfg, res)
}

// pgbenchCPU runs pgbench with one client on file and returns the server
// CPU per transaction (µs), read from the postmaster's counters of reaped
// children.
func pgbenchCPU(ctx context.Context, pgbench string, c *pgCluster, pm int, mode, file string, n int) (float64, error) {
	before := children(pm)
	c0, err := reapedCPU(pm)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, pgbench, "-n", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", c.user,
		"-c", "1", "-t", strconv.Itoa(n), "-M", mode, "-f", file, "postgres")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w: %s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("actually processed: %d/%d", n, n)) {
		return 0, fmt.Errorf("pgbench did not run every transaction: %s", out)
	}
	// The backend exits after pgbench disconnects; the postmaster adds its
	// CPU to cutime/cstime when it reaps it. Bounded: 10 s.
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := false
		for pid := range children(pm) {
			if !before[pid] {
				left = true
			}
		}
		if !left {
			break
		}
		if time.Now().After(deadline) {
			return 0, errors.New("the pgbench backend was not reaped within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c1, err := reapedCPU(pm)
	if err != nil {
		return 0, err
	}
	return float64(c1-c0) / float64(n) / float64(time.Microsecond), nil
}

// children lists the processes whose parent is pid (zombies included:
// they are not reaped yet).
func children(pid int) map[int]bool {
	out := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(p); err == nil && st.ppid == pid {
			out[p] = true
		}
	}
	return out
}

// reapedCPU is the CPU of pid's reaped children (cutime + cstime).
func reapedCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad stat of %d", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); cutime is field 16, cstime 17.
	if len(f) < 15 {
		return 0, fmt.Errorf("short stat of %d", pid)
	}
	cu, _ := strconv.ParseInt(f[13], 10, 64)
	cs, _ := strconv.ParseInt(f[14], 10, 64)
	return time.Duration(cu+cs) * clockTick, nil
}

func writePollCost(cfg PollCostConfig, res PollCostResult) error {
	j, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.OutDir, "poll.json"), j, 0o644); err != nil {
		return err
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Idle poll: server CPU over SELECT 1\n\n")
	p("`%s`, %s. pgbench, one client per statement, %d transactions per run, %d rounds run alternately "+
		"(every statement of both modes, then again), medians; %d journal entries (one transaction each) on a private "+
		"cluster (autovacuum off, no extension loaded). Server CPU per call = the postmaster's cutime + cstime "+
		"(`/proc/PID/stat`) after the run's backend was reaped, minus before, over the transactions: exactly "+
		"that backend's CPU, its connection start included (10 ms ticks: ±%.1f µs per call).\n\n",
		cfg.Command, res.Start.UTC().Format("2006-01-02 15:04 MST"), cfg.Transactions, cfg.Rounds, cfg.Entries,
		float64(clockTick/time.Microsecond)/float64(cfg.Transactions))
	p("| mode | statement | server CPU per call (median) | × SELECT 1 | each round (µs) |\n|---|---|---|---|---|\n")
	for _, m := range res.Modes {
		for _, st := range m.Statements {
			runs := make([]string, len(st.PerUS))
			for i, v := range st.PerUS {
				runs[i] = fmt.Sprintf("%.1f", v)
			}
			p("| %s | %s | %.1f µs | %.2f× | %s |\n", m.Mode, st.Name, st.Median, st.Ratio, strings.Join(runs, ", "))
		}
	}
	p("\nTargets: the idle poll ≤ 1.5× `SELECT 1` with prepared statements, ≤ 2× with the simple protocol. " +
		"\"Snapshot moved, nothing new\" is a poll whose cursor was taken before unrelated writes (in a fleet, other " +
		"replicas' heartbeats end between two polls): the function runs its statement, which finds nothing.\n")
	return os.WriteFile(filepath.Join(cfg.OutDir, "poll.md"), []byte(b.String()), 0o644)
}
