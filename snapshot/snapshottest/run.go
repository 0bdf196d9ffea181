package snapshottest

import "testing"

// Run is the conformance suite, the contract every store backend meets:
// each case is a parallel subtest (named after the behaviour) on fresh
// stores of b. A backend's package calls it from its tests:
//
//	func TestConformance(t *testing.T) { snapshottest.Run(t, snapshottest.Postgres) }
//
// Cases that differ between stores by design branch on Store.Kind.
func Run(t *testing.T, b Backend) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}

// cases are the suite's behaviours, file by file.
var cases = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"BodiesAboveTheCapAreNotRead", testBodiesAboveTheCapAreNotRead},
	{"BodiesPastTheTotalAreWithheld", testBodiesPastTheTotalAreWithheld},
	{"Catalog", testCatalog},
	{"ChangesSurface", testChangesSurface},
	{"RowsAsThePlatformWritesThem", testRowsAsThePlatformWritesThem},
	{"AbortedTransactionSurfacesNothing", testAbortedTransactionSurfacesNothing},
	{"RelistEqualsTables", testRelistEqualsTables},
	{"OutOfOrderCommit", testOutOfOrderCommit},
	{"ConcurrentWritersNoneMissed", testConcurrentWritersNoneMissed},
	{"ExpiredCursorAfterPrune", testExpiredCursorAfterPrune},
	{"RegressedCursor", testRegressedCursor},
	{"ZeroCursorNeedsRelist", testZeroCursorNeedsRelist},
	{"StallAndHead", testStallAndHead},
	{"ReadTellsDeletedRevisions", testReadTellsDeletedRevisions},
	{"FleetTables", testFleetTables},
	{"HeartbeatClash", testHeartbeatClash},
	{"PlatformUpserts", testPlatformUpserts},
	{"GuardTables", testGuardTables},
	{"Lease", testLease},
	{"MigrateIdempotent", testMigrateIdempotent},
	{"CheckSchemaMissing", testCheckSchemaMissing},
	{"MigrateHealsTriggers", testMigrateHealsTriggers},
	{"CredentialOwners", testCredentialOwners},
	{"BadHeartbeatRowKeepsTheFleet", testBadHeartbeatRowKeepsTheFleet},
	{"TruncateSurfaces", testTruncateSurfaces},
}
