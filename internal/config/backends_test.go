package config

// store.url is checked against the store backends linked in: the tests
// link them as the binary does.
import _ "github.com/objectstack-fleet/reconciler/snapshot/backends"
