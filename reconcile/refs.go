package reconcile

import (
	"encoding/json"
	"errors"

	"github.com/objectstack-fleet/reconciler/internal/canonjson"
)

// verifyChecksum reports a checksum that does not match the body.
// INTERIM: replaced by the metadata package.
func verifyChecksum(body []byte, sum string) error {
	got, err := canonjson.Checksum(body)
	if err != nil || got != sum {
		return errors.New("checksum mismatch")
	}
	return nil
}

// The kinds of reference a body makes besides metadata types.
const (
	refCredential = "\x00credential"
	refConnector  = "\x00connector"
	refDatasource = "\x00datasource"
)

// itemRef is one reference a body makes: a metadata type and name, or one
// of the ref kinds above.
type itemRef struct{ kind, name string }

// parseItem lists what a body references and whether it is desired.
// INTERIM: replaced by the metadata package.
func parseItem(typ, name string, body []byte) ([]itemRef, bool, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, false, errors.New("metadata is not a JSON object")
	}
	var refs []itemRef
	str := func(raw json.RawMessage) string {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	switch typ {
	case "connector":
		var b struct {
			Enabled *bool `json:"enabled"`
			Auth    struct {
				Type          string `json:"type"`
				CredentialRef string `json:"credentialRef"`
			} `json:"auth"`
		}
		_ = json.Unmarshal(body, &b)
		if b.Enabled != nil && !*b.Enabled {
			return nil, false, nil
		}
		if b.Auth.CredentialRef != "" && b.Auth.Type != "none" {
			refs = append(refs, itemRef{refCredential, b.Auth.CredentialRef})
		}
	case "datasource":
		var b struct {
			Active   *bool `json:"active"`
			External struct {
				CredentialsRef string `json:"credentialsRef"`
				Connector      string `json:"connector"`
			} `json:"external"`
		}
		_ = json.Unmarshal(body, &b)
		if b.Active != nil && !*b.Active {
			return nil, false, nil
		}
		if b.External.CredentialsRef != "" {
			refs = append(refs, itemRef{refCredential, b.External.CredentialsRef})
		} else if b.External.Connector != "" {
			refs = append(refs, itemRef{refConnector, b.External.Connector})
		}
	case "object":
		var fields map[string]struct {
			Type      string `json:"type"`
			Reference string `json:"reference"`
		}
		_ = json.Unmarshal(m["fields"], &fields)
		seen := map[string]bool{}
		for _, f := range fields {
			if f.Reference != "" && !seen[f.Reference] {
				seen[f.Reference] = true
				refs = append(refs, itemRef{"object", f.Reference})
			}
		}
		if ds := str(m["datasource"]); ds != "" {
			refs = append(refs, itemRef{refDatasource, ds})
		}
	case "view", "hook":
		if o := str(m["object"]); o != "" {
			refs = append(refs, itemRef{"object", o})
		}
	case "permission":
		var objs map[string]json.RawMessage
		_ = json.Unmarshal(m["objects"], &objs)
		for o := range objs {
			refs = append(refs, itemRef{"object", o})
		}
	}
	return refs, true, nil
}
