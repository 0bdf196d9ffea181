package replica

import "github.com/objectstack-fleet/reconciler/registry"

// keyParts are the parts of an entry's key.
type keyParts = registry.KeyParts

// secretPrefix starts the key of a credential read from sys_secret.
const secretPrefix = registry.SecretPrefix

// parseKey splits a key of kind k into its parts.
func parseKey(k registry.Kind, key string) (keyParts, error) { return registry.ParseKey(k, key) }
