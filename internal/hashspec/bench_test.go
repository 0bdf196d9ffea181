package hashspec

import (
	"os"
	"testing"
)

// benchBodies: a typical object body from the corpus vector, the same
// body with its keys already in order (the fast path), and a small body as
// PostgreSQL prints a jsonb column (a space after ':' and ',', members out
// of canonical order), the size of most sys_metadata rows.
func benchBodies(b *testing.B) map[string][]byte {
	var realistic []byte
	for _, v := range loadVectors(b) {
		if v.Name == "corpus_object_account" {
			realistic = []byte(v.Body)
		}
	}
	if realistic == nil {
		b.Fatal("no corpus_object_account vector")
	}
	sorted, err := Canonical(realistic)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/checksums.json")
	if err != nil {
		b.Fatal(err)
	}
	small := []byte(`{"label": "Object 17", "fields": {"name": {"type": "text"}, "amount": {"type": "currency"}, "parent": {"type": "lookup", "reference": "obj18"}}}`)
	return map[string][]byte{"object": realistic, "sorted": sorted, "vectors_file": raw, "small_object": small}
}

func BenchmarkChecksum(b *testing.B) {
	for name, body := range benchBodies(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Checksum(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendCanonical appends into one reused buffer, as the
// reconciler does per row.
func BenchmarkAppendCanonical(b *testing.B) {
	for name, body := range benchBodies(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = AppendCanonical(buf[:0], body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReference is the step-by-step reference implementation, for
// comparison.
func BenchmarkReference(b *testing.B) {
	body := benchBodies(b)["object"]
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := refChecksum(body); err != nil {
			b.Fatal(err)
		}
	}
}
