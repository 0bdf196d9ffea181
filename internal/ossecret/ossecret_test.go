package ossecret

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// platformVectors are sys_secret rows sealed by the platform's own
// LocalCryptoProvider (scripts/checksums/secret-vectors.mjs).
type platformVectors struct {
	KeyHex       string `json:"key_hex"`
	KeyBase64    string `json:"key_base64"`
	KeyBase64URL string `json:"key_base64url"`
	Vectors      []struct {
		ID         string  `json:"id"`
		Namespace  *string `json:"namespace"`
		Key        string  `json:"key"`
		KMSKeyID   string  `json:"kms_key_id"`
		Alg        string  `json:"alg"`
		Version    float64 `json:"version"`
		Ciphertext string  `json:"ciphertext"`
		Plaintext  string  `json:"plaintext"`
	} `json:"vectors"`
}

func loadVectors(t *testing.T) platformVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v platformVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return v
}

func mustKey(t *testing.T, s string) Key {
	t.Helper()
	k, err := ParseKey(s)
	if err != nil {
		t.Fatalf("ParseKey: %v", err)
	}
	return k
}

func TestPlatformVectors(t *testing.T) {
	t.Parallel()
	v := loadVectors(t)
	// Each spelling of the key the platform accepts opens every row.
	for _, spelling := range []string{v.KeyHex, strings.ToUpper(v.KeyHex), v.KeyBase64, v.KeyBase64URL, "  " + v.KeyHex + "\n"} {
		k := mustKey(t, spelling)
		for _, r := range v.Vectors {
			s := Sealed{ID: r.ID, Key: r.Key, KMSKeyID: r.KMSKeyID, Alg: r.Alg, Ciphertext: r.Ciphertext}
			if r.Namespace != nil {
				s.Namespace = *r.Namespace
			}
			got, err := Decrypt(k, s)
			if err != nil || got != r.Plaintext {
				t.Errorf("%s (%s): Decrypt = %q, %v; want %q", r.ID, r.KMSKeyID, got, err, r.Plaintext)
			}
			// Bound to its row: another namespace or key does not open it.
			moved := s
			moved.Key += "x"
			if _, err := Decrypt(k, moved); !errors.Is(err, ErrWrongKey) {
				t.Errorf("%s moved to another key: err = %v, want ErrWrongKey", r.ID, err)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	k := mustKey(t, loadVectors(t).KeyHex)
	for _, plain := range []string{"", "p", "pässwörd 😀", strings.Repeat("long ", 1000)} {
		s, err := Encrypt(k, "datasource", "crm", plain)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.ID, "sec_") || len(s.ID) != 36 || s.KMSKeyID != "local:v1" || s.Alg != Alg {
			t.Errorf("Encrypt row = %+v", s)
		}
		got, err := Decrypt(k, s)
		if err != nil || got != plain {
			t.Errorf("round trip of %d bytes = %q, %v", len(plain), got, err)
		}
	}
	a, _ := Encrypt(k, "n", "k", "same")
	b, _ := Encrypt(k, "n", "k", "same")
	if a.Ciphertext == b.Ciphertext || a.ID == b.ID {
		t.Error("two seals of one value are equal: nonce or id not random")
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"", "   ",
		strings.Repeat("a", 63), strings.Repeat("g", 64), // not hex, and base64 of 48 bytes
		base64.StdEncoding.EncodeToString(make([]byte, 16)),
		base64.StdEncoding.EncodeToString(make([]byte, 33)),
		"not a key at all!",
	} {
		k, err := ParseKey(bad)
		if err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
		if !k.IsZero() {
			t.Errorf("ParseKey(%q) returned a key with its error", bad)
		}
		if bad != "" && strings.TrimSpace(bad) != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("ParseKey error repeats its input: %v", err)
		}
	}
}

// TestErrorsNeverHoldSecrets: every way of failing names the secret and the
// reason, never the plaintext, the ciphertext or the key.
func TestErrorsNeverHoldSecrets(t *testing.T) {
	t.Parallel()
	const canary = "CANARY-7f3a9c-plaintext"
	v := loadVectors(t)
	k := mustKey(t, v.KeyHex)
	other := mustKey(t, strings.Repeat("ab", 32))
	good, err := Encrypt(k, "datasource", "crm", canary)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(good.Ciphertext)
	with := func(f func(*Sealed)) Sealed { s := good; f(&s); return s }
	cases := []struct {
		name string
		key  Key
		row  Sealed
		want error
	}{
		{"no key", Key{}, good, ErrNoKey},
		{"wrong key", other, good, ErrWrongKey},
		{"moved to another namespace", k, with(func(s *Sealed) { s.Namespace = "mail" }), ErrWrongKey},
		{"tampered", k, with(func(s *Sealed) {
			b := bytes.Clone(raw)
			b[len(b)-1] ^= 1
			s.Ciphertext = base64.StdEncoding.EncodeToString(b)
		}), ErrWrongKey},
		{"not base64", k, with(func(s *Sealed) { s.Ciphertext = "%%" + canary }), ErrMalformed},
		{"too short", k, with(func(s *Sealed) { s.Ciphertext = base64.StdEncoding.EncodeToString(raw[:20]) }), ErrMalformed},
		{"external KMS", k, with(func(s *Sealed) { s.KMSKeyID = "aws-kms:arn:aws:kms:eu-west-1:1:key/abc" }), ErrUnsupported},
		{"empty KMS id", k, with(func(s *Sealed) { s.KMSKeyID = "" }), ErrUnsupported},
		{"other algorithm", k, with(func(s *Sealed) { s.Alg = "chacha20-poly1305" }), ErrUnsupported},
	}
	for _, c := range cases {
		got, err := Decrypt(c.key, c.row)
		if !errors.Is(err, c.want) || got != "" {
			t.Errorf("%s: Decrypt = %q, %v; want %v", c.name, got, err, c.want)
			continue
		}
		var se *Error
		if !errors.As(err, &se) || se.ID != good.ID {
			t.Errorf("%s: error %v does not name the secret", c.name, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, good.ID) {
			t.Errorf("%s: message %q does not name the secret", c.name, msg)
		}
		for _, leak := range []string{canary, good.Ciphertext, c.row.Ciphertext, v.KeyHex, v.KeyBase64, strings.Repeat("ab", 32)} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: message %q leaks secret material", c.name, msg)
			}
		}
	}
	if msg := fmt.Sprint(Decrypt(k, with(func(s *Sealed) { s.KMSKeyID = "vault:transit/x" }))); !strings.Contains(msg, `external KMS "vault:transit/x" not supported`) {
		t.Errorf("external KMS message = %q", msg)
	}
}

// TestKeyNeverPrints: a Key formatted or logged shows no key material.
func TestKeyNeverPrints(t *testing.T) {
	t.Parallel()
	v := loadVectors(t)
	k := mustKey(t, v.KeyHex)
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("key", "key", k)
	for _, out := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k), logged.String()} {
		if !strings.Contains(out, "redacted") || strings.Contains(out, v.KeyHex) || strings.Contains(out, "0x") {
			t.Errorf("key printed as %q", out)
		}
	}
}
