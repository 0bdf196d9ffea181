// Package buildinfo says which build of the reconciler is running: the
// release version (a tag when the commit has one), the commit and whether
// the tree was dirty, read from the Go toolchain's build information so
// that a plain `go build` in a checkout is enough to stamp a binary.
package buildinfo
