package metadata

import (
	"strings"

	"github.com/objectstack-fleet/reconciler/internal/canonjson"
)

// Checksum returns the platform's checksum of body:
// "sha256:<hex>" of its canonical JSON.
func Checksum(body []byte) (string, error) { return canonjson.Checksum(body) }

// VerifyChecksum checks body against the checksum stored beside it. An
// empty checksum (NULL in the row) is not checked. A mismatch, or a body
// that is not JSON, is a *Fault "checksum mismatch" (errors.Is ErrChecksum
// and ErrInvalid).
func VerifyChecksum(body []byte, checksum string) error {
	checksum = strings.TrimSpace(checksum)
	if checksum == "" {
		return nil
	}
	sum, err := Checksum(body)
	if err != nil || !strings.EqualFold(sum, checksum) {
		return &Fault{Msg: "checksum mismatch", kind: ErrChecksum}
	}
	return nil
}
