// Package metadata holds the platform's rules for metadata bodies: what a
// body of each type must look like, what it references, whether it is
// wanted at all, and whether its stored checksum holds. The loop that
// tracks dependencies between items and the drivers that build them both
// call it, so the rules live in one place.
//
// # References
//
// A body is the JSON object an ObjectStack 17.4 node stores in
// sys_metadata.metadata. [Parse] reads it in the shape the platform's spec
// (@objectstack/spec 17.4.0) gives its type, and lists its references:
//
//   - object: each lookup, master_detail or tree field's reference and each
//     roll-up summary's child object (fields are a map of field name to
//     field); the datasource it lives in unless that is the primary
//     "default"; objects bound by its built-in list views.
//   - view: its object, and the object each held view's data source binds
//     (list, form, listViews.*, formViews.*, a view item's config).
//   - hook: its object or objects ("*", every object, names none).
//   - permission: the keys of objects, and the object part of each
//     "object.field" key of fields ("*" names none).
//   - flow: config.objectName of its nodes (the start node's trigger object,
//     the record nodes' and object-form screens' objects), nested regions
//     included; a "{token}" template names none.
//   - dataset, page: object; action: objectName; report: its dataset and
//     each block's dataset.
//   - connector: the credential its auth type uses (auth.credentialRef for
//     bearer, api-key and basic; none for none). enabled: false means it is
//     not wanted.
//   - datasource (a runtime datasource record): external.credentialsRef, a
//     credential ("sys_secret:<id>" or a connector credential's ref); failing
//     that external.connector, whose credential it borrows. active: false
//     means it is not wanted.
//   - any other type: any JSON object, naming nothing.
//
// Names match exactly and case-sensitively: a hook on "Account" does not
// name the object "account". Parse resolves nothing; resolving a reference
// to a row (organization, package, state) is the caller's job.
// [IsCodeObject] says which object names resolve without a row.
//
// # Faults
//
// Faults are [*Fault] values (errors.Is [ErrInvalid]) whose message names
// the member at fault, so a caller classifies them without matching
// strings. [Limits] caps the body size and the number of references;
// parsing is linear in the body.
//
// # Driver bodies
//
// The drivers that build connectors and datasources read the rest of their
// bodies with the same scanner and the same faults: [ReadBody] returns a
// [Body] read member by member, [Faultf] names a member the drivers' own
// rules refuse, and [Body.Connector] applies Parse's connector rule to a
// body already read, so a connector body is read once.
package metadata
