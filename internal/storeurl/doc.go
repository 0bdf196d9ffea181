// Package storeurl knows which store URL schemes exist and what form each
// takes, without opening anything. Each store backend registers its
// schemes here (through snapshot.Register, from its package's init), so
// that the configuration's check of store.url and snapshot.Open agree on
// one list and a new backend is not added in a second place.
//
// It is a leaf: it imports nothing of the module but internal/redact, so
// that internal/config can use it.
package storeurl
