package corpus_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	items, err := corpus.Load()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	seen := map[string]bool{}
	for _, it := range items {
		count[it.Type]++
		if seen[it.Type+"/"+it.Name] {
			t.Errorf("%s/%s repeats", it.Type, it.Name)
		}
		seen[it.Type+"/"+it.Name] = true
		var m map[string]any
		if err := json.Unmarshal(it.Body, &m); err != nil {
			t.Errorf("%s/%s: body is not a JSON object: %v", it.Type, it.Name, err)
		}
	}
	if len(items) != 114 || count["object"] != 65 || count["view"] != 6 || count["hook"] != 43 {
		t.Fatalf("corpus has %d items %v, want 114: 65 objects, 6 views, 43 hooks", len(items), count)
	}
	src, err := corpus.Source()
	if err != nil || src == "" {
		t.Fatalf("Source = %q, %v", src, err)
	}
	again, _ := corpus.Load()
	again[0].Body[0] = 'x'
	if items[0].Body[0] != '{' {
		t.Fatal("Load shares bodies between calls")
	}
}

func TestRow(t *testing.T) {
	t.Parallel()
	it := corpus.Item{Type: "object", Name: "account", Body: []byte(`{"name":"account"}`)}
	row := it.Row()
	if len(row) != 4 || row[0] != "object-account" || row[1] != "object" || row[2] != "account" || row[3] != `{"name":"account"}` {
		t.Fatalf("Row = %v", row)
	}
	if strings.Count(corpus.Insert, "$") != len(row) {
		t.Fatalf("Insert takes %d arguments, Row gives %d", strings.Count(corpus.Insert, "$"), len(row))
	}
}
