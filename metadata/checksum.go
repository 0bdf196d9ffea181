package metadata

import (
	"fmt"
	"strings"

	"github.com/objectstack-fleet/reconciler/internal/hashspec"
)

// Checksum returns the platform's checksum of body: "sha256:" and the hex
// SHA-256 of its canonical JSON, with JavaScript's key order, number
// printing and string escaping.
func Checksum(body []byte) (string, error) { return hashspec.Checksum(body) }

// VerifyChecksum checks body against the checksum stored beside it. An
// empty checksum (NULL in the row) is not checked. A mismatch, or a body
// the platform could not have hashed, is a *Fault "checksum mismatch"
// (errors.Is ErrChecksum and ErrInvalid) naming both checksums, shortened.
func VerifyChecksum(body []byte, checksum string) error {
	if checksum == "" {
		return nil
	}
	sum, err := Checksum(body)
	switch {
	case err != nil:
		return &Fault{Msg: fmt.Sprintf("checksum mismatch (stored %s; the body has none: %v)", shortSum(checksum), err), kind: ErrChecksum}
	case sum != checksum:
		return &Fault{Msg: fmt.Sprintf("checksum mismatch (stored %s, body %s)", shortSum(checksum), shortSum(sum)), kind: ErrChecksum}
	}
	return nil
}

// ChecksumRemedy returns what a held "checksum mismatch" of row id at
// revision says beside the mismatch: what the platform's nodes serve (they
// check no checksum), and how to fix the row.
func ChecksumRemedy(id string, revision int64) string {
	return fmt.Sprintf("ObjectStack does not check checksums, so its nodes serve this body (revision %d) all the same; "+
		"fix the row: `reconciler checksum --row %s` prints the body's checksum, or set checksum to NULL (accepted)", revision, id)
}

// ChecksumFix is the statement that makes row id's stored checksum true:
// set to sum, the body's checksum (NULL, which the platform accepts, when
// the body has none).
func ChecksumFix(id, sum string) string {
	q := "'" + strings.ReplaceAll(id, "'", "''") + "'"
	if sum == "" {
		return "UPDATE sys_metadata SET checksum = NULL WHERE id = " + q + ";"
	}
	return "UPDATE sys_metadata SET checksum = '" + sum + "' WHERE id = " + q + ";  -- or checksum = NULL"
}

// shortSum shortens a checksum for a reason: its algorithm and 12 hex
// digits (a stored value is quoted and cut).
func shortSum(s string) string {
	if rest, ok := strings.CutPrefix(s, hashspec.Prefix); ok && len(rest) == 64 && strings.Trim(rest, "0123456789abcdef") == "" {
		return hashspec.Prefix + rest[:12] + "…"
	}
	return quote(s)
}
