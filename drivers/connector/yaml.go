package connector

import (
	"errors"

	"go.yaml.in/yaml/v3"
)

// isOpenAPIYAML reports whether doc is a YAML mapping with a scalar
// "openapi" member.
func isOpenAPIYAML(doc []byte) error {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil || len(root.Content) != 1 {
		return errors.New("not a JSON or YAML document")
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return errors.New("not a JSON or YAML object")
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "openapi" {
			if v := m.Content[i+1]; v.Kind != yaml.ScalarNode || v.Value == "" {
				return errors.New("its openapi member is not a version string")
			}
			return nil
		}
	}
	return errors.New("missing the openapi member")
}
