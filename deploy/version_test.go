package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/buildinfo"
)

// TestVersionFromBuildInfo builds the binary in a fresh clone of HEAD, as
// `make dist` does, and checks that `reconciler version --json` reports
// the commit and a clean tree, then the tag once the commit has one; then
// changes a tracked file and checks that
// the next build says dirty.
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	head := git("..", "rev-parse", "HEAD")
	clone := filepath.Join(t.TempDir(), "src")
	git("..", "clone", "-q", "--no-hardlinks", ".", clone)
	git(clone, "checkout", "-q", "--detach", head)

	version := func() buildinfo.Info {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "reconciler")
		build := exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-o", bin, "./cmd/reconciler")
		build.Dir = clone
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "version", "--json").Output()
		if err != nil {
			t.Fatalf("version --json: %v", err)
		}
		var info buildinfo.Info
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatalf("version --json: %v\n%s", err, out)
		}
		text, err := exec.Command(bin, "version").Output()
		if err != nil || !strings.Contains(string(text), info.Version) || !strings.Contains(string(text), head[:12]) {
			t.Errorf("version: %q (%v), want the version and the commit", text, err)
		}
		return info
	}

	clean := version()
	if clean.Commit != head || clean.Dirty || clean.Version == "" || clean.Version == "dev" || clean.CommitTime == "" {
		t.Errorf("clean build: %+v, want commit %s, not dirty, a version", clean, head)
	}
	if !strings.HasPrefix(clean.Version, "v") {
		t.Errorf("version %q: want a tag or a pseudo-version", clean.Version)
	}

	// A tagged commit reports its tag.
	git(clone, "tag", "v1.8.7")
	if tagged := version(); tagged.Version != "v1.8.7" || tagged.Commit != head || tagged.Dirty {
		t.Errorf("tagged build: %+v, want v1.8.7", tagged)
	}

	if err := os.WriteFile(filepath.Join(clone, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirty := version()
	if dirty.Commit != head || !dirty.Dirty {
		t.Errorf("build of a modified tree: %+v, want commit %s and dirty", dirty, head)
	}
	t.Logf("clean: %s", clean)
}
