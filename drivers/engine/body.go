package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Field is one field of an object.
type Field struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Reference is the object a lookup field points at ("" if none).
	Reference string `json:"reference,omitempty"`
}

// shape is what a body says about references, decoded from the JSON.
type shape struct {
	fields     []Field
	objects    []string // referenced objects, deduplicated, in order
	datasource string
}

// ErrShape is the cause of every body fault (errors.Is); the failure's
// reason names the fault.
var ErrShape = errors.New("invalid metadata body")

// shapeError is one body fault.
type shapeError struct{ msg string }

func (e *shapeError) Error() string { return e.msg }
func (e *shapeError) Unwrap() error { return ErrShape }

func fault(format string, args ...any) error {
	return &shapeError{msg: fmt.Sprintf(format, args...)}
}

// decodeObject decodes b as one JSON object, keeping members raw.
func decodeObject(b []byte, what string) (map[string]json.RawMessage, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, fault("%s must be a JSON object", what)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fault("%s is not valid JSON: %v", what, err)
	}
	return m, nil
}

// str reads member key of m as a string. A missing or null member gives
// ok=false; a present member of another type, or an empty string, is a
// fault naming path.
func str(m map[string]json.RawMessage, key, path string) (string, bool, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, fault("%s must be a string", path)
	}
	if s == "" {
		return "", false, fault("%s must not be empty", path)
	}
	return s, true, nil
}

// required is str for a member that must be present.
func required(m map[string]json.RawMessage, key, path string) (string, error) {
	s, ok, err := str(m, key, path)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fault("%s is required", path)
	}
	return s, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// decode validates body as an item of type typ and returns its references.
func decode(typ string, body []byte) (shape, error) {
	m, err := decodeObject(body, "body")
	if err != nil {
		return shape{}, err
	}
	var sh shape
	switch typ {
	case "object":
		ds, _, err := str(m, "datasource", "datasource")
		if err != nil {
			return shape{}, err
		}
		sh.datasource = ds
		if sh.fields, err = decodeFields(m); err != nil {
			return shape{}, err
		}
		for _, f := range sh.fields {
			if f.Reference != "" {
				sh.objects = appendUnique(sh.objects, f.Reference)
			}
		}
	case "view", "permission":
		o, err := required(m, "object", "object")
		if err != nil {
			return shape{}, err
		}
		sh.objects = []string{o}
	case "flow":
		raw, ok := m["trigger"]
		if !ok || isNull(raw) {
			return shape{}, fault("trigger is required")
		}
		tm, err := decodeObject(raw, "trigger")
		if err != nil {
			return shape{}, err
		}
		o, err := required(tm, "object", "trigger.object")
		if err != nil {
			return shape{}, err
		}
		sh.objects = []string{o}
	}
	return sh, nil
}

// decodeFields reads an object's fields. A missing fields member means no
// fields; anything else must be an array of field objects.
func decodeFields(m map[string]json.RawMessage) ([]Field, error) {
	raw, ok := m["fields"]
	if !ok || isNull(raw) {
		return nil, nil
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '[' {
		return nil, fault("fields must be an array")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fault("fields must be an array")
	}
	fields := make([]Field, 0, len(elems))
	seen := make(map[string]int, len(elems))
	for i, e := range elems {
		path := fmt.Sprintf("fields[%d]", i)
		fm, err := decodeObject(e, path)
		if err != nil {
			return nil, err
		}
		var f Field
		if f.Name, err = required(fm, "name", path+".name"); err != nil {
			return nil, err
		}
		if f.Type, err = required(fm, "type", path+".type"); err != nil {
			return nil, err
		}
		if f.Reference, _, err = str(fm, "reference", path+".reference"); err != nil {
			return nil, err
		}
		if j, dup := seen[f.Name]; dup {
			return nil, fault("%s.name %q repeats fields[%d]", path, f.Name, j)
		}
		seen[f.Name] = i
		fields = append(fields, f)
	}
	return fields, nil
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
