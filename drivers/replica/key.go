package replica

import "github.com/objectstack-fleet/reconciler/registry"

// Entry keys are registry's: it owns their format and their parsing.
type keyParts = registry.KeyParts

const secretPrefix = registry.SecretPrefix

func parseKey(k registry.Kind, key string) (keyParts, error) { return registry.ParseKey(k, key) }
