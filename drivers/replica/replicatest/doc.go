// Package replicatest is a stand-in ObjectStack 17.4 node for tests and
// benchmarks of the replica driver where a real node cannot run (go test,
// ten replicas on a small machine). It answers the read-only routes the
// driver probes, listens to the lane channels on a real Redis bus and
// applies them as 17.4 does: metadata.mutated re-reads the row and
// registers or unregisters an object; datasource.mutated rebuilds or drops
// the pool; flows and permission sets change only at boot; a restart
// forgets run-time objects.
package replicatest
