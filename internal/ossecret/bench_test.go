package ossecret

import "testing"

func BenchmarkDecrypt(b *testing.B) {
	k, err := ParseKey("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	if err != nil {
		b.Fatal(err)
	}
	s, err := Encrypt(k, "datasource", "crm", "s3cret-Passw0rd!")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decrypt(k, s); err != nil {
			b.Fatal(err)
		}
	}
}
