package config

import "reflect"

// Changed returns the keys whose values differ between a and b, in the
// order of Keys.
func Changed(a, b *Config) []string {
	var out []string
	for _, k := range declarations() {
		if !reflect.DeepEqual(k.addr(a), k.addr(b)) {
			out = append(out, k.Name)
		}
	}
	return out
}
