package snapshot

import (
	"strconv"
	"strings"

	"github.com/objectstack-fleet/reconciler/secret"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// MaxCiphertextBytes caps the sys_secret ciphertexts a read returns: a
// platform secret (a password, a token) is a few hundred bytes; a longer
// one is neither sent nor read, only its length (SecretRow.Withheld), so a
// row cannot make every sidecar read and decode megabytes.
const MaxCiphertextBytes = 64 << 10

// MaxCiphertextSQL is MaxCiphertextBytes in the selects' text.
const MaxCiphertextSQL = "65536"

// CiphertextOf reads a selected ciphertext: '!' and a length (never a
// base64 character) stands for one above the cap.
func CiphertextOf(s string) (secret.Secret, int64) {
	if n, ok := strings.CutPrefix(s, "!"); ok {
		v, _ := strconv.ParseInt(n, 10, 64)
		return secret.Secret{}, v
	}
	return secret.New(s), 0
}
