// Package config loads and validates the daemon's configuration.
//
// Sources, later ones winning: built-in defaults, the YAML file (--config,
// default ./config.yaml when present), environment variables RECONCILER_ +
// the key upper-cased with "." replaced by "_", and flags named exactly as
// the key (--store.url). Every problem is reported with the key it concerns.
// A Viper instance is created per load; the global one is never used.
//
// # One declaration per key
//
// Each key is one row of declarations (keys.go): its name (a Key* constant,
// which other packages use in messages), its default, its usage line, the
// Config field it fills (whose Go type picks the decoding) and the rules
// its value must meet. Flags ([AddFlags]), environment variables, decoding,
// validation, [Changed], [CheckEnv] and the test that config.yaml documents
// every key by its full path all come from that row. Adding a key is: a
// constant, a row, a Config field, and its documented default in the
// repository's config.yaml (the test fails until it is there).
//
// [CheckEnv] reports RECONCILER_* variables that name no key, with the
// nearest key, so a typo is never silently ignored.
package config
