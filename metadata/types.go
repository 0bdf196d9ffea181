package metadata

import "slices"

// Types are the metadata types an ObjectStack 17.4 node knows (its
// sys_metadata.type values); connector and datasource rows are their own
// registries' entries, the others engine entries.
var Types = []string{
	"object", "field", "hook", "seed", "mapping", "view", "page", "dashboard",
	"app", "action", "report", "dataset", "flow", "job", "datasource", "external_catalog",
	"translation", "api", "email_template", "doc", "book", "permission", "position",
	"capability", "agent", "tool", "skill", "connector",
}

// IsType reports whether t is one of Types.
func IsType(t string) bool { return slices.Contains(Types, t) }
