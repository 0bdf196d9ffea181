package metadata

import (
	"slices"
	"strings"
)

// CodeObjectPrefix starts the names of the objects the platform defines in
// code (sys_user, sys_metadata, …).
const CodeObjectPrefix = "sys_"

// IsCodeObject reports whether an object called name is defined in code,
// not by a row: its name begins with "sys_" or is one of extra (the
// configured code objects). Such a reference resolves without a row.
func IsCodeObject(name string, extra []string) bool {
	return strings.HasPrefix(name, CodeObjectPrefix) || slices.Contains(extra, name)
}
