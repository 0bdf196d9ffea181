package snapshot

import "time"

// HeartbeatInterval is how often a replica with poll.interval poll writes
// its heartbeat row (a Replica) at least: a keepalive, since a change of
// what the row reports is written at once. It is 5 polls, and not more
// often than every heartbeatFloor. The writer (`reconciler run`) and the
// readers that judge a row stale by it (`reconciler fleet`, the status
// page, the scale benchmark) share this one definition.
func HeartbeatInterval(poll time.Duration) time.Duration { return max(5*poll, heartbeatFloor) }

// heartbeatFloor keeps a large fleet's keepalives cheap for the store: at
// poll.interval 1s, 1,000 replicas write 33 rows a second, not 200.
const heartbeatFloor = 30 * time.Second
