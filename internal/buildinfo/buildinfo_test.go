package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-30T04:29:13Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	const rev = "cd81190abcdef0123456789abcdef0123456789a"
	cases := []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     Info
	}{
		{"tagged", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs(rev, "false")},
			"", Info{Version: "v1.2.0", Commit: rev, CommitTime: "2026-11-30T04:29:13Z", Go: "go1.26.8"}},
		{"dirty pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261130042913-cd81190abcde+dirty"}, Settings: vcs(rev, "true")},
			"", Info{Version: "v0.0.0-20261130042913-cd81190abcde", Commit: rev, CommitTime: "2026-11-30T04:29:13Z", Dirty: true, Go: "go1.26.8"}},
		{"no vcs", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"", Info{Version: "dev", Go: "go1.26.8"}},
		{"override", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs(rev, "false")},
			"e2e", Info{Version: "e2e", Commit: rev, CommitTime: "2026-11-30T04:29:13Z", Go: "go1.26.8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := fromBuildInfo(c.bi, c.override); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	i := Info{Version: "v1.2.0", Commit: "cd81190abcdef0123456789", Dirty: true, Go: "go1.26.8"}
	if got, want := i.String(), "v1.2.0 (commit cd81190abcde, dirty) go1.26.8"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
