package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info describes one build.
type Info struct {
	// Version is the release version: the tag of the commit (v1.2.0), a
	// pseudo-version (v0.0.0-20261130042913-cd81190abcde) when the commit
	// has none, or "dev" when the binary was built outside a checkout.
	Version string `json:"version"`
	// Commit is the full commit hash ("" when unknown).
	Commit string `json:"commit"`
	// CommitTime is the commit's time, RFC 3339 ("" when unknown).
	CommitTime string `json:"commit_time,omitempty"`
	// Dirty reports uncommitted changes in the tree the binary was built from.
	Dirty bool `json:"dirty"`
	// Go is the toolchain's version.
	Go string `json:"go"`
}

// Read returns the running binary's Info. override, when not empty,
// replaces the version (a build's -ldflags "-X main.versionOverride=…").
func Read(override string) Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, override)
}

func fromBuildInfo(bi *debug.BuildInfo, override string) Info {
	info := Info{Version: "dev", Go: runtime.Version()}
	if bi == nil {
		if override != "" {
			info.Version = override
		}
		return info
	}
	if bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Dirty = s.Value == "true"
		}
	}
	// The toolchain stamps the main module's version from the commit's tag,
	// or a pseudo-version, with "+dirty" for a modified tree: Dirty says it.
	if v := strings.TrimSuffix(bi.Main.Version, "+dirty"); v != "" && v != "(devel)" {
		info.Version = v
	}
	if override != "" {
		info.Version = override
	}
	return info
}

// Short is the commit's first 12 characters ("" when unknown).
func (i Info) Short() string {
	if len(i.Commit) > 12 {
		return i.Commit[:12]
	}
	return i.Commit
}

// String prints the info on one line: version, commit, dirty, toolchain.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	if c := i.Short(); c != "" {
		b.WriteString(" (commit " + c)
		if i.Dirty {
			b.WriteString(", dirty")
		}
		b.WriteString(")")
	}
	b.WriteString(" " + i.Go)
	return b.String()
}
