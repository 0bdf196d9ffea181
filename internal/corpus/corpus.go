package corpus

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed hotcrm.json
var hotcrm []byte

// Item is one metadata item of the corpus.
type Item struct {
	Type string
	Name string
	// Body is the item's metadata JSON object, as the platform stores it.
	Body json.RawMessage
}

// Insert writes an item as a sys_metadata row on either store, with
// Item.Row's arguments: how tests load the corpus.
const Insert = `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, $2, $3, $4)`

// Row is an item's arguments to Insert: the id "<type>-<name>", its type,
// its name and its body.
func (it Item) Row() []any { return []any{it.Type + "-" + it.Name, it.Type, it.Name, string(it.Body)} }

// Source says where the corpus was taken from (repository and commit).
func Source() (string, error) {
	var doc struct {
		Source string `json:"source"`
	}
	if err := json.Unmarshal(hotcrm, &doc); err != nil {
		return "", fmt.Errorf("decode corpus: %w", err)
	}
	return doc.Source, nil
}

// Load returns the corpus items in the order the corpus lists them. Each
// call returns fresh copies.
func Load() ([]Item, error) {
	var doc struct {
		Items []struct {
			Type     string          `json:"type"`
			Name     string          `json:"name"`
			Metadata json.RawMessage `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(hotcrm, &doc); err != nil {
		return nil, fmt.Errorf("decode corpus: %w", err)
	}
	items := make([]Item, len(doc.Items))
	for i, it := range doc.Items {
		if it.Type == "" || it.Name == "" || len(it.Metadata) == 0 {
			return nil, fmt.Errorf("corpus item %d: type, name and metadata are required", i)
		}
		items[i] = Item{Type: it.Type, Name: it.Name, Body: it.Metadata}
	}
	return items, nil
}
