package metadata

import "github.com/objectstack-fleet/reconciler/internal/hashspec"

// Checksum returns the platform's checksum of body: "sha256:" and the hex
// SHA-256 of its canonical JSON, with JavaScript's key order, number
// printing and string escaping.
func Checksum(body []byte) (string, error) { return hashspec.Checksum(body) }

// VerifyChecksum checks body against the checksum stored beside it. An
// empty checksum (NULL in the row) is not checked. A mismatch, or a body
// the platform could not have hashed, is a *Fault "checksum mismatch"
// (errors.Is ErrChecksum and ErrInvalid).
func VerifyChecksum(body []byte, checksum string) error {
	if checksum == "" {
		return nil
	}
	sum, err := Checksum(body)
	if err != nil || sum != checksum {
		return &Fault{Msg: "checksum mismatch", kind: ErrChecksum}
	}
	return nil
}
