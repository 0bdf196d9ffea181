package metadata_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
	"github.com/objectstack-fleet/reconciler/metadata"
)

// wide is a body of type typ with n distinct references.
func wide(typ string, n int) []byte {
	var b strings.Builder
	switch typ {
	case "object":
		b.WriteString(`{"name":"wide","fields":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"f%d":{"type":"lookup","reference":"o%d"}`, i, i)
		}
		b.WriteString(`}}`)
	case "permission":
		b.WriteString(`{"name":"wide","objects":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"o%d":{"allowRead":true}`, i)
		}
		b.WriteString(`}}`)
	case "hook":
		b.WriteString(`{"name":"wide","object":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"o%d"`, i)
		}
		b.WriteString(`]}`)
	}
	return []byte(b.String())
}

// BenchmarkParse100kRefs parses bodies with 100,000 distinct references
// (caps raised to allow them): the cost is linear in the body.
func BenchmarkParse100kRefs(b *testing.B) {
	lim := metadata.Limits{MaxBodyBytes: 64 << 20, MaxRefs: 1_000_000}
	for _, typ := range []string{"object", "permission", "hook"} {
		body := wide(typ, 100_000)
		b.Run(typ, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				it, err := metadata.Parse(typ, "wide", body, lim)
				if err != nil || len(it.Refs) != 100_000 {
					b.Fatalf("Parse: %v", err)
				}
			}
		})
	}
}

// BenchmarkParseCorpus parses the 114 HotCRM items once per iteration.
func BenchmarkParseCorpus(b *testing.B) {
	items, err := corpus.Load()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range items {
			if _, err := metadata.Parse(c.Type, c.Name, c.Body, metadata.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// smallObject is a typical object body as PostgreSQL prints jsonb: the
// reconciler's cold start calls Refs once for each of ~100k such rows.
var smallObject = []byte(`{"label": "Object 17", "fields": {"name": {"type": "text"}, "amount": {"type": "currency"}, "parent": {"type": "lookup", "reference": "obj18"}}}`)

// BenchmarkRefsSmall reads the references of one small object body.
func BenchmarkRefsSmall(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		it, err := metadata.Refs("object", "obj17", smallObject, metadata.Limits{})
		if err != nil || len(it.Refs) != 1 {
			b.Fatalf("Refs: %v %v", it, err)
		}
	}
}
