package config

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// AddFlags adds a flag named exactly as each of keys (all keys when none
// are given) to fs, with the key's default shown in the help.
func AddFlags(fs *pflag.FlagSet, keys ...string) {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	for _, k := range Keys() {
		if len(keys) > 0 && !want[k.Name] {
			continue
		}
		usage := k.Usage + " (env " + EnvName(k.Name) + ")"
		switch d := k.Default.(type) {
		case bool:
			fs.Bool(k.Name, d, usage)
		case int:
			fs.Int(k.Name, d, usage)
		case []string:
			fs.String(k.Name, strings.Join(d, " "), usage+"; words separated by spaces")
		default:
			fs.String(k.Name, fmt.Sprint(d), usage)
		}
	}
}
