// Package registry holds a replica's local registries: one per kind
// (credential, connector, datasource, engine), each a set of entries with
// their applied signature, state, reason and the live instance. The reconcile
// loop is the only writer; readers (status API, drift, the embedding app) get
// copies and never block a pass for longer than a map copy.
package registry
