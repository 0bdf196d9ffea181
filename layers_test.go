// The import-layer rule of the module, checked on what `go list` reports
// (River checks the same with depguard; this needs no linter).
package reconciler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/objectstack-fleet/reconciler"

// A layer is a set of packages and the layers its packages may import
// (a layer may always import itself). Listed from the bottom up.
type layer struct {
	name    string
	of      func(pkg string) bool
	imports []string
}

// leaves are the packages that import nothing of the module but other
// leaves: registry, secret and the internal helpers below the store.
var leaves = []string{
	"registry", "secret",
	"internal/backoff", "internal/buildinfo", "internal/coalesce", "internal/config",
	"internal/corpus", "internal/fleet", "internal/hashspec", "internal/hostrule", "internal/ossecret", "internal/pgfake",
	"internal/proctest", "internal/redact", "internal/shutdown", "internal/storeurl", "internal/testdb",
	"drivers/replica/replicatest",
}

func under(prefix string) func(string) bool {
	return func(p string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
}

// layers is the rule: the store below the loop, the loop below the
// drivers, the daemon above them all and only cmd above the daemon.
// Drivers reach the store only through the loop's interfaces (they import
// neither snapshot nor the daemon); the loop imports no driver.
var layers = []layer{
	{"leaf", func(p string) bool { return slices.Contains(leaves, p) }, nil},
	{"metadata", under("metadata"), []string{"leaf"}},
	{"store", under("snapshot"), []string{"leaf", "metadata"}},
	{"loop", under("reconcile"), []string{"leaf", "metadata", "store"}},
	{"drivers", func(p string) bool { return under("drivers")(p) && !slices.Contains(leaves, p) },
		[]string{"leaf", "metadata", "loop"}},
	{"daemon", under("internal/daemon"), []string{"leaf", "metadata", "store", "loop", "drivers"}},
	{"cmd", under("cmd"), []string{"leaf", "metadata", "store", "loop", "drivers", "daemon"}},
	// Test suites and tools with no production code of their own.
	{"tools", func(p string) bool {
		return under("scripts")(p) || under("chaos")(p) || under("deploy")(p) || under("e2e")(p)
	}, []string{"leaf", "metadata", "store", "loop", "drivers"}},
}

// allowed are the imports that break the rule today, each with the work
// that removes it. TestImportLayers fails on an entry no longer needed, so
// the list only shrinks: delete the entry with the import.
var allowed = map[string]string{
	// Issue 28, import-layer rule: fleet views embed the store's heartbeat
	// rows and its head watermark; those value types belong below the
	// store, in a leaf both import.
	"internal/fleet -> snapshot": "issue 28: a fleet view is built of the store's heartbeat rows",
	// Issue 28, import-layer rule: the replica driver's repair and restart
	// (issues 22, 23) take the store's leases, metadata rows and heartbeat
	// rows; the driver should see them through interfaces and types below
	// the store.
	"drivers/replica -> snapshot": "issue 28: repair and restart use the store's leases, metadata and heartbeat rows",
}

type pkg struct {
	ImportPath string
	Imports    []string
}

// listPackages returns the module's packages with their production imports
// (test imports are left out: tests build real stores and daemons).
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "objectstack", "-json=ImportPath,Imports", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

func layerOf(p string) (layer, bool) {
	for _, l := range layers {
		if l.of(p) {
			return l, true
		}
	}
	return layer{}, false
}

// violations checks pkgs against the rule: the imports that break it,
// "a -> b" with module-relative paths, and the packages in no layer.
func violations(pkgs []pkg) (broken, unplaced []string) {
	for _, p := range pkgs {
		from, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue // the module root holds only this test
		}
		lf, ok := layerOf(from)
		if !ok {
			unplaced = append(unplaced, from)
			continue
		}
		for _, imp := range p.Imports {
			to, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			lt, ok := layerOf(to)
			if !ok {
				unplaced = append(unplaced, to)
				continue
			}
			if lt.name != lf.name && !slices.Contains(lf.imports, lt.name) {
				broken = append(broken, from+" -> "+to)
			}
		}
	}
	return broken, unplaced
}

func TestImportLayers(t *testing.T) {
	broken, unplaced := violations(listPackages(t))
	for _, p := range unplaced {
		t.Errorf("package %s is in no layer: add it to layers_test.go", p)
	}
	for _, e := range broken {
		if _, ok := allowed[e]; !ok {
			t.Errorf("import %s breaks the layer rule (layers_test.go)", e)
		}
	}
	for e := range allowed {
		if !slices.Contains(broken, e) {
			t.Errorf("import %s is gone: remove its entry from allowed", e)
		}
	}
}

// TestImportLayersCatchViolations: the rule refuses each kind of import it
// forbids, and a leaf importing anything above it.
func TestImportLayersCatchViolations(t *testing.T) {
	for _, edge := range []string{
		"registry -> metadata",
		"secret -> snapshot",
		"internal/redact -> reconcile",
		"reconcile -> drivers/engine",
		"drivers/notify -> snapshot",
		"drivers/engine -> internal/daemon",
		"snapshot -> reconcile",
		"reconcile -> internal/daemon/statusapi",
		"chaos -> internal/daemon",
	} {
		from, to, _ := strings.Cut(edge, " -> ")
		broken, _ := violations([]pkg{{ImportPath: module + "/" + from, Imports: []string{module + "/" + to}}})
		if !slices.Equal(broken, []string{edge}) {
			t.Errorf("%s: the rule found %v", edge, broken)
		}
	}
	if _, unplaced := violations([]pkg{{ImportPath: module + "/newpkg"}}); !slices.Equal(unplaced, []string{"newpkg"}) {
		t.Errorf("a package in no layer: %v", unplaced)
	}
}
