package snapshottest

// Impostor is a sys_metadata row of the key-collision attack: with the
// key format of old, each Fake row's key read the same as a Real row's.
type Impostor struct {
	ID, Org, Type, Name string
	Fake                bool // deleting it must leave every real row's entry
}

// Impostors are the key-collision attack's rows: an org-less row whose
// name or type carries what another organization's key would
// (`acme:crm`), an organization or type split at a separator, a name or
// type with a slash. Each must get an entry of its own.
var Impostors = []Impostor{
	{ID: "c-real", Org: "acme", Type: "connector", Name: "crm"},
	{ID: "c-fake", Type: "connector", Name: "acme:crm", Fake: true},
	{ID: "o-real", Org: "acme", Type: "object", Name: "x"},
	{ID: "o-fake", Type: "acme:object", Name: "x", Fake: true},
	{ID: "o-org-colon", Org: "a:b", Type: "object", Name: "y"},
	{ID: "o-org-split", Org: "a", Type: "b:object", Name: "y", Fake: true},
	{ID: "o-slash", Type: "object", Name: "p/q"},
	{ID: "o-slash-type", Type: "object/p", Name: "q", Fake: true},
}

// InsertImpostor writes one Impostor row on either store: $1 id, $2
// organization_id (empty for NULL), $3 type, $4 name, $5 metadata.
const InsertImpostor = `INSERT INTO sys_metadata (id, organization_id, type, name, metadata) VALUES ($1, NULLIF($2, ''), $3, $4, $5)`
