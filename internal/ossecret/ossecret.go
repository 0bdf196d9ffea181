package ossecret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"
)

// The platform's constants for local secrets.
const (
	// Alg is the only algorithm of local secrets.
	Alg = "aes-256-gcm"
	// LocalPrefix starts the kms_key_id of a secret sealed with the local
	// key.
	LocalPrefix = "local:"

	nonceSize = 12
	tagSize   = 16
)

// Sentinel errors, each wrapped in an *Error naming the secret.
var (
	// ErrNoKey: no key was configured.
	ErrNoKey = errors.New("no secret key configured")
	// ErrWrongKey: the value does not authenticate under the key and the
	// row's namespace and key (another key, or a value moved between
	// rows).
	ErrWrongKey = errors.New("does not decrypt with the configured key (wrong key, or the value belongs to another namespace/key)")
	// ErrMalformed: the row cannot be a sealed value (not base64, too
	// short, plaintext not UTF-8).
	ErrMalformed = errors.New("malformed secret")
	// ErrUnsupported: sealed by an external KMS or another algorithm.
	ErrUnsupported = errors.New("unsupported secret")
)

// Error is why one secret could not be opened. It names the secret and
// never holds its bytes.
type Error struct {
	ID     string // the sys_secret row's id
	Kind   error  // ErrNoKey, ErrWrongKey, ErrMalformed or ErrUnsupported
	Detail string // what exactly, when Kind alone does not say
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("secret %q: %v", e.ID, e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns Kind, for errors.Is.
func (e *Error) Unwrap() error { return e.Kind }

// Key is the platform's secret key, ready to use. The zero Key is no key:
// Decrypt refuses with ErrNoKey. A Key prints as "[redacted]".
type Key struct {
	aead cipher.AEAD
}

// ParseKey reads a key as the platform reads OS_SECRET_KEY: surrounding
// space trimmed, then 64 hex characters, or base64 (standard or URL
// alphabet, padding optional) of exactly 32 bytes. The error never repeats
// the text.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	var raw []byte
	if len(s) == 64 {
		if b, err := hex.DecodeString(s); err == nil {
			raw = b
		}
	}
	if raw == nil {
		b64 := strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimRight(s, "="))
		if b, err := base64.RawStdEncoding.DecodeString(b64); err == nil && len(b) == 32 {
			raw = b
		}
	}
	if raw == nil {
		return Key{}, errors.New("secret key is neither 64 hex characters nor base64 of 32 bytes")
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return Key{}, fmt.Errorf("secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return Key{}, fmt.Errorf("secret key: %w", err)
	}
	return Key{aead: aead}, nil
}

// IsZero reports whether k is no key.
func (k Key) IsZero() bool { return k.aead == nil }

// String, GoString and LogValue keep the key out of logs and errors.
func (k Key) String() string { return "[redacted]" }

// GoString redacts the key for %#v.
func (k Key) GoString() string { return "ossecret.Key{[redacted]}" }

// LogValue redacts the key for slog.
func (k Key) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Sealed is a sys_secret row, as far as opening it goes.
type Sealed struct {
	ID         string // id, e.g. sec_<hex>
	Namespace  string // namespace (NULL reads as ""), e.g. "datasource"
	Key        string // key (NULL reads as ""), e.g. the datasource's name
	KMSKeyID   string // kms_key_id, e.g. "local:v1"
	Alg        string // alg, "aes-256-gcm"
	Ciphertext string // ciphertext: base64(nonce ‖ tag ‖ encrypted)
}

// aad is the additional authenticated data the platform binds a value to.
func (s Sealed) aad() []byte { return []byte(s.Namespace + "|" + s.Key) }

func (s Sealed) check() error {
	if s.KMSKeyID == "" {
		return &Error{ID: s.ID, Kind: ErrUnsupported, Detail: "no kms_key_id (want local:…)"}
	}
	if !strings.HasPrefix(s.KMSKeyID, LocalPrefix) {
		return &Error{ID: s.ID, Kind: ErrUnsupported, Detail: fmt.Sprintf("external KMS %q not supported", s.KMSKeyID)}
	}
	if s.Alg != "" && !strings.EqualFold(s.Alg, Alg) {
		return &Error{ID: s.ID, Kind: ErrUnsupported, Detail: fmt.Sprintf("algorithm %q not supported", s.Alg)}
	}
	return nil
}

// Decrypt returns the plaintext of a sealed row.
func Decrypt(k Key, s Sealed) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	if k.IsZero() {
		return "", &Error{ID: s.ID, Kind: ErrNoKey}
	}
	blob, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s.Ciphertext))
	if err != nil {
		return "", &Error{ID: s.ID, Kind: ErrMalformed, Detail: "ciphertext is not base64"}
	}
	if len(blob) < nonceSize+tagSize {
		return "", &Error{ID: s.ID, Kind: ErrMalformed, Detail: fmt.Sprintf("ciphertext is %d bytes, shorter than nonce and tag", len(blob))}
	}
	nonce, tag, enc := blob[:nonceSize], blob[nonceSize:nonceSize+tagSize], blob[nonceSize+tagSize:]
	// Go's GCM wants the tag after the encrypted bytes.
	sealed := make([]byte, 0, len(enc)+tagSize)
	sealed = append(append(sealed, enc...), tag...)
	plain, err := k.aead.Open(sealed[:0], nonce, sealed, s.aad())
	if err != nil {
		return "", &Error{ID: s.ID, Kind: ErrWrongKey}
	}
	if !utf8.Valid(plain) {
		return "", &Error{ID: s.ID, Kind: ErrMalformed, Detail: "plaintext is not UTF-8 text"}
	}
	return string(plain), nil
}

// Encrypt seals plaintext for the row (namespace, key) as the platform
// does: a fresh random nonce, kms_key_id "local:v1", a new id
// "sec_<32 hex>".
func Encrypt(k Key, namespace, key, plaintext string) (Sealed, error) {
	if k.IsZero() {
		return Sealed{}, ErrNoKey
	}
	var id [16]byte
	nonce := make([]byte, nonceSize, nonceSize+len(plaintext)+tagSize)
	if _, err := rand.Read(id[:]); err != nil {
		return Sealed{}, fmt.Errorf("encrypt secret: %w", err)
	}
	if _, err := rand.Read(nonce); err != nil {
		return Sealed{}, fmt.Errorf("encrypt secret: %w", err)
	}
	s := Sealed{ID: "sec_" + hex.EncodeToString(id[:]), Namespace: namespace, Key: key, KMSKeyID: "local:v1", Alg: Alg}
	out := k.aead.Seal(nil, nonce, []byte(plaintext), s.aad()) // encrypted ‖ tag
	enc, tag := out[:len(out)-tagSize], out[len(out)-tagSize:]
	blob := append(append(nonce, tag...), enc...)
	s.Ciphertext = base64.StdEncoding.EncodeToString(blob)
	return s, nil
}
