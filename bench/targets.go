package bench

import (
	"fmt"
	"math"
	"strings"
)

// target is one goal of issue 6 and how this run did against it.
type target struct {
	name, goal, measured string
	met, known           bool
	why                  string // what limits it, when missed
}

func evalTargets(r *Results) []target {
	c := r.Config
	var ts []target
	if len(r.Idle) >= 2 {
		lo, hi := r.Idle[0], r.Idle[len(r.Idle)-1]
		stmt := hi.Reconciler.StmtMS / lo.Reconciler.StmtMS
		bytes := hi.Reconciler.Bytes / lo.Reconciler.Bytes
		server := hi.Reconciler.ServerMS / lo.Reconciler.ServerMS
		t := target{name: "1. idle cost flat", known: true,
			goal: fmt.Sprintf("%s within 1.5× of %s", sizeName(hi.Rows), sizeName(lo.Rows)),
			measured: fmt.Sprintf("poll statement server time %s, all statements %s, bytes %s, round trips %s → %s",
				ratio(hi.Reconciler.StmtMS, lo.Reconciler.StmtMS), ratio(hi.Reconciler.ServerMS, lo.Reconciler.ServerMS),
				ratio(hi.Reconciler.Bytes, lo.Reconciler.Bytes), f2(lo.Reconciler.RoundTrips)+"/"+f2(hi.Reconciler.RoundTrips), ""),
		}
		t.measured = strings.TrimSuffix(t.measured, " → ")
		t.met = bytes <= 1.5 && (!r.PGSS || stmt <= 1.5)
		if !t.met {
			t.why = fmt.Sprintf("the poll statement's server time grows %s from %s to %s rows (all statements: %s)", ratio(hi.Reconciler.StmtMS, lo.Reconciler.StmtMS), sizeName(lo.Rows), sizeName(hi.Rows), num(server, 2)+"×")
		}
		ts = append(ts, t)
	}
	if len(r.Change) > 0 {
		worstPoll, worstHint := 0.0, 0.0
		for _, x := range r.Change {
			worstPoll = math.Max(worstPoll, x.Poll.P99)
			worstHint = math.Max(worstHint, x.Hint.P99)
		}
		lim := float64(c.ChangeInterval.Milliseconds()) + 10
		ts = append(ts, target{name: "2. change cost, polling", known: true,
			goal:     fmt.Sprintf("p99 ≤ poll.interval + 10 ms = %s ms", f0(lim)),
			measured: fmt.Sprintf("worst p99 over sizes %s ms", f1(worstPoll)), met: worstPoll <= lim})
		ts = append(ts, target{name: "2. change cost, with hint", known: true,
			goal:     "p99 ≤ 20 ms",
			measured: fmt.Sprintf("worst p99 over sizes %s ms", f1(worstHint)), met: worstHint <= 20})
	}
	for _, x := range r.Cold {
		if x.Rows != 100_000 {
			continue
		}
		for _, ch := range r.Change {
			if ch.Rows == x.Rows {
				v := x.StartMS / ch.PassMS
				ts = append(ts, target{name: "3. versus full reload at 100k", known: true, goal: "≥ 1000×",
					measured: fmt.Sprintf("%s ms ÷ %s ms = %s", f0(x.StartMS), f2(ch.PassMS), ratio(x.StartMS, ch.PassMS)), met: v >= 1000})
			}
		}
	}
	var drops []string
	all := true
	for _, x := range r.Change {
		if x.Drop == nil {
			continue
		}
		drops = append(drops, fmt.Sprintf("%s: pull %d/%d, push %d/%d", sizeName(x.Rows), x.Drop.PullApplied, x.Drop.Changes, x.Drop.PushApplied, x.Drop.Changes))
		all = all && x.Drop.PullApplied == x.Drop.Changes
	}
	if len(drops) > 0 {
		ts = append(ts, target{name: "4. 1% of push messages lost", known: true, goal: "pull applies 100%",
			measured: strings.Join(drops, "; "), met: all})
	}
	if len(r.Fleet) > 1 {
		base := r.Fleet[0].CPUPercent
		for _, f := range r.Fleet {
			if f.Reconcilers == 50 {
				ts = append(ts, target{name: "6. fleet of 50", known: true, goal: "< 5% of one core",
					measured: fmt.Sprintf("%s%% above the idle cluster (%s%% raw), %s statements/s", f2(f.CPUPercent-base), f2(f.CPUPercent), f1(f.StmtPerSec)),
					met:      f.CPUPercent-base < 5})
			}
		}
	}
	return ts
}

func renderTargets(b *strings.Builder, r *Results) {
	ts := evalTargets(r)
	if len(ts) == 0 {
		return
	}
	fmt.Fprintf(b, "## Targets\n\n| target | goal | measured | |\n|---|---|---|---|\n")
	for _, t := range ts {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", t.name, t.goal, t.measured, yesNo(t.met))
	}
	fmt.Fprintf(b, "\n")
}

// renderLimits says, for each missed target, what limits it.
func renderLimits(b *strings.Builder, r *Results) {
	var missed []target
	for _, t := range evalTargets(r) {
		if !t.met {
			missed = append(missed, t)
		}
	}
	fmt.Fprintf(b, "## Where a target is missed, and what limits it\n\n")
	if len(missed) == 0 {
		fmt.Fprintf(b, "Every target was met in this run.\n\n")
	}
	for _, t := range missed {
		fmt.Fprintf(b, "- **%s** (%s; measured %s). %s\n", t.name, t.goal, t.measured, limitText(t, r))
	}
	fmt.Fprintf(b, "\n")
}
