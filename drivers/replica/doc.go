// Package replica drives an ObjectStack replica through the platform's own
// lanes and checks that it converged.
//
// After the loop applies a change, the Driver publishes the platform's lane
// message for it on the platform's Redis bus (PUBLISH <prefix>ps:<channel>
// with the envelope {"n":origin,"t":unix ms,"p":payload}); the payload is an
// address (type and name, a datasource name, a credential ref), never a body
// or a value. The platform's receivers re-read the row the message names.
//
// Where the replica shows what it holds (objects through its data API and
// the layers route, datasources through its datasource list), the Driver
// probes it read-only, before publishing (a replica that already agrees gets
// no message, so a fleet of sidecars sends about one message per change) and
// after (nudging again with backoff until it agrees). Flows and permission
// sets are reloaded by ObjectStack 17.4 only at boot: a copy older than the
// row is reported stale, naming the remedy. Entries whose replica state
// cannot be observed are published once per change and again after the
// replica restarts, and reported unverifiable, never in-sync.
//
// The Driver also watches the replica's health endpoint: when its uptime
// goes down (a restart) every entry is checked again, so run-time objects,
// which a restarted node does not reload by itself, are registered again.
package replica
