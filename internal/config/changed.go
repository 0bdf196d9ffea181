package config

import "reflect"

// Changed returns the keys whose values differ between a and b, in the
// order of Keys.
func Changed(a, b *Config) []string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	byKey := make(map[string]int, va.NumField())
	for i := range va.NumField() {
		if k := va.Type().Field(i).Tag.Get("key"); k != "" {
			byKey[k] = i
		}
	}
	var out []string
	for _, k := range Keys() {
		i, ok := byKey[k.Name]
		if ok && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, k.Name)
		}
	}
	return out
}
