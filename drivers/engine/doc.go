// Package engine compiles sys_metadata items of every type the engine
// registry holds (objects, views, hooks, permission sets, flows and the
// rest) into live entries.
//
// Compiling checks the body with package metadata (the platform's shape
// for its type, the caps on size and references), verifies the row's
// checksum when one is stored, and returns an *Item naming the item's
// fields and references. Faults are reconcile.Invalid, so the entry is
// held with a reason naming the member at fault.
//
// Resolving references is the reconcile loop's job: it reads them with
// metadata.Refs before materializing, holds an item whose references are
// missing, and hands the resolved ones to the compiler in Desired.Refs.
package engine
