package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// exposition is a parsed /metrics answer: the families and their samples'
// label sets.
type exposition struct {
	families map[string]string              // name → type
	samples  map[string][]map[string]string // sample name → label sets
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? `)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func parseExposition(text string) exposition {
	e := exposition{families: map[string]string{}, samples: map[string][]map[string]string{}}
	for _, line := range strings.Split(text, "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, typ, ok := strings.Cut(f, " "); ok {
				e.families[name] = typ
			}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[3], -1) {
			labels[p[1]] = p[2]
		}
		e.samples[m[1]] = append(e.samples[m[1]], labels)
	}
	return e
}

// has reports whether the sample name belongs to an exported family
// (histograms' _bucket, _sum and _count included).
func (e exposition) has(name string) bool {
	if _, ok := e.families[name]; ok {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if typ := e.families[base]; typ == "histogram" || typ == "summary" {
				return true
			}
		}
	}
	return false
}

// selector is one metric selector of an expression.
type selector struct {
	name     string
	matchers [][3]string // label, op, value
}

var (
	stringLit  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	selectorRe = regexp.MustCompile(`\b((?:reconciler|process|go|promhttp)_[a-zA-Z0-9_:]*|up)\b\s*(\{[^}]*\})?`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
)

// selectors returns the metric selectors of a PromQL expression: every
// name of this daemon's families (reconciler_, process_, go_, promhttp_)
// and up, with their label matchers.
func selectors(expr string) []selector {
	var out []selector
	// Names inside string literals (label values, descriptions) are not
	// selectors: blank them, keeping the matchers' positions.
	masked := stringLit.ReplaceAllStringFunc(expr, func(s string) string { return `"` + strings.Repeat(" ", len(s)-2) + `"` })
	for _, loc := range selectorRe.FindAllStringSubmatchIndex(masked, -1) {
		s := selector{name: expr[loc[2]:loc[3]]}
		if loc[4] >= 0 {
			for _, m := range matcherRe.FindAllStringSubmatch(expr[loc[4]:loc[5]], -1) {
				s.matchers = append(s.matchers, [3]string{m[1], m[2], m[3]})
			}
		}
		out = append(out, s)
	}
	return out
}

// checkSelector fails unless the daemon exports sel's family and, for
// each matcher on a label the daemon sets (not job or instance, which
// Prometheus adds, nor Grafana variables), a series that matches.
func checkSelector(t *testing.T, where string, e exposition, sel selector) {
	t.Helper()
	if !e.has(sel.name) {
		t.Errorf("%s names %s, which the daemon does not export", where, sel.name)
		return
	}
	for _, m := range sel.matchers {
		label, op, value := m[0], m[1], m[2]
		if label == "job" || label == "instance" || strings.Contains(value, "$") || op == "!=" || op == "!~" {
			continue
		}
		re := regexp.MustCompile("^(?:" + value + ")$")
		found := false
		for _, labels := range e.samples[sel.name] {
			if v, ok := labels[label]; ok && ((op == "=" && v == value) || (op == "=~" && re.MatchString(v))) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s selects %s{%s%s%q}, a series the daemon does not export from its start", where, sel.name, label, op, value)
		}
	}
}

// alertExprs returns every rule's expression in alerts.yaml by alert name.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// dashboardExprs returns every query of the Grafana dashboard (panel
// targets, nested panels and template variables) by where it is.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("grafana/reconciler.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		ID      int     `json:"id"`
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	var dash struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("reconciler.json: %v", err)
	}
	out := map[string]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out[fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			_ = json.Unmarshal(v.Query, &q.Query)
		}
		out["variable "+v.Name] = q.Query
	}
	return out
}

// TestMetricNamesAgainstLiveDaemon runs the demo daemon (no replica, no
// notify target, no hint: the least configured) and checks that every
// metric the alert rules and the dashboard name — and every label value
// they select — is in its /metrics from the start.
func TestMetricNamesAgainstLiveDaemon(t *testing.T) {
	t.Parallel()
	dm := startDemo(t, nil)
	dm.d.waitReady(60 * time.Second)
	code, text := dm.d.get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, text)
	}
	e := parseExposition(text)

	alerts := alertExprs(t)
	if len(alerts) < 8 {
		t.Fatalf("alerts.yaml: %d rules, want the full set", len(alerts))
	}
	for name, expr := range alerts {
		sels := selectors(expr)
		if len(sels) == 0 {
			t.Errorf("alert %s: no metric in %q", name, expr)
		}
		for _, s := range sels {
			if s.name == "up" {
				continue // Prometheus's own scrape series
			}
			checkSelector(t, "alert "+name, e, s)
		}
	}

	exprs := dashboardExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("dashboard: %d queries, want every panel's", len(exprs))
	}
	for where, expr := range exprs {
		sels := selectors(expr)
		if len(sels) == 0 {
			t.Errorf("dashboard %s: no metric in %q", where, expr)
		}
		for _, s := range sels {
			checkSelector(t, "dashboard "+where, e, s)
		}
	}
	t.Logf("%d alert rules and %d dashboard queries checked against %d exported families", len(alerts), len(exprs), len(e.families))
}

// TestMetricNameExtraction guards the checker itself: names inside
// strings are not selectors, matchers are read, histogram suffixes map to
// their family.
func TestMetricNameExtraction(t *testing.T) {
	t.Parallel()
	sels := selectors(`sum by (le) (rate(reconciler_poll_duration_seconds_bucket{job="$job"}[5m])) and on (instance) reconciler_items{state="held", kind=~"connector|engine"} > 0 unless label_replace(up, "x", "reconciler_fake", "", "")`)
	var names []string
	for _, s := range sels {
		names = append(names, s.name)
	}
	if got, want := strings.Join(names, ","), "reconciler_poll_duration_seconds_bucket,reconciler_items,up"; got != want {
		t.Fatalf("selectors: %s, want %s", got, want)
	}
	if got := fmt.Sprint(sels[1].matchers); got != "[[state = held] [kind =~ connector|engine]]" {
		t.Errorf("matchers: %s", got)
	}
	e := parseExposition("# TYPE reconciler_poll_duration_seconds histogram\nreconciler_poll_duration_seconds_bucket{le=\"0.1\"} 1\n")
	if !e.has("reconciler_poll_duration_seconds_bucket") || e.has("reconciler_poll_duration_seconds_total") {
		t.Error("histogram suffixes")
	}
}
