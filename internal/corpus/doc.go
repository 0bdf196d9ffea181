// Package corpus embeds a real application's metadata, the HotCRM corpus:
// 114 items (65 objects, 6 views, 43 hooks) in the shapes an ObjectStack
// 17.4 node stores them (objects with a fields map, hooks as type hook).
// Tests, the demo and the benchmarks load it to work on realistic bodies.
package corpus
