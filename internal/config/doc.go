// Package config loads and validates the daemon's configuration.
//
// Sources, later ones winning: built-in defaults, the YAML file (--config,
// default ./config.yaml when present), environment variables RECONCILER_ +
// the key upper-cased with "." replaced by "_", and flags named exactly as
// the key (--store.url). Every problem is reported with the key it concerns.
// A Viper instance is created per load; the global one is never used.
package config
