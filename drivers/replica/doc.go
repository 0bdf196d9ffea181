// Package replica drives an ObjectStack replica through the platform's own
// lanes and checks that it converged.
//
// # Lanes
//
// After the loop applies a change, the [Driver] publishes the platform's
// lane message for it on the platform's Redis bus (PUBLISH
// <prefix>ps:<channel> with the envelope {"n":origin,"t":unix ms,"p":payload});
// the payload is an address (type and name, a datasource name, a credential
// ref), never a body or a value. The platform's receivers re-read the row
// the message names.
//
// # Verification
//
// Where the replica shows what it holds (objects through its data API and
// the layers route, datasources through its datasource list), the Driver
// probes it read-only, before publishing (a replica that already agrees gets
// no message) and after (nudging again with backoff until it agrees; the
// look and the nudge again follow how fast this replica applies a message:
// settle.go). Flows and permission sets are reloaded by ObjectStack 17.4
// only at boot: a copy older than the row is reported stale, naming the
// remedy. Entries whose replica state cannot be observed are published once
// per change and again after the replica restarts, and reported
// unverifiable, never in-sync. At most [Options].MaxProbesPerSecond probes
// start in any one second (limit.go).
//
// # A fleet
//
// The lanes are fleet-wide: one message reaches every node, so a fleet of
// sidecars needs about one per change. The sidecars elect one first
// publisher per entry without talking, by a hash of (origin, entry) over
// the origins they have seen publish (elect.go): it checks at once, the
// others wait for its message and send nothing.
//
// # Restarts
//
// The Driver also watches the replica's health endpoint: when its uptime
// goes down (a restart) every entry is checked again, so run-time objects,
// which a restarted node does not reload by itself, are registered again.
// Its converged revision ([Driver.Converged]) and the convergence histogram
// say how far the replica serves the store (converge.go).
package replica
