//go:build unix

package config

import (
	"os"
	"syscall"
)

// foreignFile says why a file found implicitly is not to be trusted: owned
// by another user, or writable by others; "" when it may be read.
func foreignFile(name string) string {
	fi, err := os.Stat(name)
	if err != nil {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return "it belongs to another user"
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return "anyone may write it"
	}
	return ""
}
