package datasource

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/objectstack-fleet/reconciler/metadata"
)

// The configuration keys that set Options; reasons name them.
const (
	SQLiteDirKey = "datasource.sqlite_dir"
	MaxConnsKey  = "datasource.max_conns"
)

// parseSQLitePath reads config.path (or the platform's config.filename) and
// refuses what is not a plain file path: a file: URI, a query string
// (driver parameters such as _pragma=…), a ".." element, :memory:.
func parseSQLitePath(cfg metadata.Body) (string, error) {
	if err := cfg.Only("path", "filename", "autoMigrate"); err != nil {
		return "", err
	}
	key := "path"
	switch {
	case cfg.Has("path") && cfg.Has("filename"):
		return "", metadata.Faultf("", "config.path and config.filename are exclusive")
	case cfg.Has("filename"):
		key = "filename"
	}
	p, err := cfg.Required(key)
	if err != nil {
		if !cfg.Has(key) {
			return "", metadata.Faultf("config.path", "is required")
		}
		return "", err
	}
	member := "config." + key
	switch {
	case strings.HasPrefix(strings.ToLower(p), "file:"):
		return "", metadata.Faultf(member, "must be a plain file path, not a file: URI")
	case strings.ContainsAny(p, "?#"):
		return "", metadata.Faultf(member, "must be a plain file path without ? or # (no driver parameters)")
	case p == ":memory:" || strings.HasPrefix(p, ":"):
		return "", metadata.Faultf(member, "%q is not supported: an in-memory database would be private to the reconciler", p)
	case strings.ContainsRune(p, 0):
		return "", metadata.Faultf(member, "must not contain a NUL byte")
	}
	for _, el := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if el == ".." {
			return "", metadata.Faultf(member, "must not contain a .. element")
		}
	}
	return p, nil
}

// resolveSQLite returns the real path of a record's file inside dir: a
// relative path is taken relative to dir, an absolute one must lie in it.
// Symbolic links are followed and the result must still lie in dir and be
// an existing regular file; nothing is created. A path the rule refuses is
// a body fault (metadata.ErrInvalid); an unreadable directory is a plain error.
func resolveSQLite(dir, p string) (string, error) {
	if dir == "" {
		return "", metadata.Faultf("", "config.path: sqlite files are not allowed: no directory is configured (set %s)", SQLiteDirKey)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", SQLiteDirKey, dir, err)
	}
	root, err := filepath.EvalSymlinks(absDir)
	if err != nil {
		return "", fmt.Errorf("%s %q is not accessible: %w", SQLiteDirKey, dir, err)
	}
	target := p
	if !filepath.IsAbs(target) {
		target = filepath.Join(root, target)
	}
	target = filepath.Clean(target)
	// The written path must lie in the directory as written or as
	// resolved: /data/x.db with dir /data, or with dir a link to /data.
	if !within(absDir, target) && !within(root, target) {
		return "", metadata.Faultf("config.path", "%q is outside %s (%s)", p, SQLiteDirKey, dir)
	}
	real, err := filepath.EvalSymlinks(target)
	if errors.Is(err, fs.ErrNotExist) {
		return "", metadata.Faultf("config.path", "%q: file does not exist (it is never created)", p)
	}
	if err != nil {
		return "", fmt.Errorf("config.path %q: %w", p, err)
	}
	if !within(root, real) {
		return "", metadata.Faultf("config.path", "%q resolves outside %s (through a symbolic link)", p, SQLiteDirKey)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("config.path %q: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		return "", metadata.Faultf("config.path", "%q is not a regular file", p)
	}
	return real, nil
}

// within reports whether p is dir or lies below it (both clean, absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// sqliteDSN is the driver name for a resolved file: a file: URI with the
// path escaped and mode=rw, so that SQLite opens it read-write and never
// creates it, and no other parameter reaches the driver.
func sqliteDSN(real string) string {
	u := url.URL{Scheme: "file", Path: real, RawQuery: "mode=rw"}
	return u.String()
}
