// Package engine compiles sys_metadata items of every type other than
// 'connector' into the engine registry's live entries (DESIGN §6).
//
// Compiling validates the body's shape for the types that carry references
// (object, view, flow, permission), verifies the row's checksum when one is
// stored, and returns an *Item naming the item's fields and references.
// Every other type is accepted as any JSON object.
//
// References resolution itself is the reconcile loop's job: it extracts
// references with References before materializing, holds an item whose
// references are missing, and hands the resolved ones to the compiler in
// Desired.Refs.
package engine
