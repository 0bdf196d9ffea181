package replica

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
)

// The platform's lane channels (before the bus prefix and "ps:").
const (
	ChannelMetadata   = "metadata.mutated"
	ChannelDatasource = "datasource.mutated"
	ChannelCredential = "connector-credential.mutated"
	ChannelAuthz      = "authz.invalidated"
)

// Channels lists every lane channel the Driver publishes on and observes.
var Channels = []string{ChannelMetadata, ChannelDatasource, ChannelCredential, ChannelAuthz}

// DefaultPrefix is the platform's default bus key prefix.
const DefaultPrefix = "os:"

// envelope is the platform's bus message: {"n":node,"t":unix ms,"p":payload}.
type envelope struct {
	N string          `json:"n"`
	T int64           `json:"t"`
	P json.RawMessage `json:"p"`
}

// metadataPayload is metadata.mutated's payload.
type metadataPayload struct {
	OriginNode string        `json:"originNode"`
	Event      metadataEvent `json:"event"`
}

type metadataEvent struct {
	Type           string  `json:"type"`
	Name           string  `json:"name"`
	State          string  `json:"state"` // "active" or "deleted"
	OrganizationID *string `json:"organizationId"`
}

// namePayload is datasource.mutated's payload.
type namePayload struct {
	OriginNode string `json:"originNode"`
	Name       string `json:"name"`
}

// refPayload is connector-credential.mutated's payload.
type refPayload struct {
	OriginNode string `json:"originNode"`
	Ref        string `json:"ref"`
}

// authzPayload is authz.invalidated's payload.
type authzPayload struct {
	OriginNode string `json:"originNode"`
	Epoch      int64  `json:"epoch"`
	Reason     string `json:"reason"`
	At         int64  `json:"at"`
}

// lane is one message the Driver publishes for an entry: its channel and
// the address it names (the key two sidecars' messages for one entry
// share, so that one sees the other's).
type lane struct {
	Channel string
	Address string
	payload func(origin string, now time.Time) any
}

// lanesFor returns the messages that tell a replica about a change of the
// entry (kind, parts): deleted when the row is gone or no longer active.
func lanesFor(kind registry.Kind, p registry.KeyParts, deleted bool) []lane {
	switch kind {
	case registry.KindEngine:
		state := "active"
		if deleted {
			state = "deleted"
		}
		var org *string
		if p.Org != "" {
			org = &p.Org
		}
		ev := metadataEvent{Type: p.Type, Name: p.Name, State: state, OrganizationID: org}
		out := []lane{{
			Channel: ChannelMetadata,
			Address: metadataAddress(p.Org, p.Type, p.Name),
			payload: func(origin string, _ time.Time) any { return metadataPayload{OriginNode: origin, Event: ev} },
		}}
		if p.Type == "permission" {
			out = append(out, lane{
				Channel: ChannelAuthz,
				Address: "",
				payload: func(origin string, now time.Time) any {
					ms := now.UnixMilli()
					return authzPayload{OriginNode: origin, Epoch: ms, Reason: "permission " + p.Name + " changed", At: ms}
				},
			})
		}
		return out
	case registry.KindDatasource:
		name := p.Name
		return []lane{{
			Channel: ChannelDatasource,
			Address: name,
			payload: func(origin string, _ time.Time) any { return namePayload{OriginNode: origin, Name: name} },
		}}
	case registry.KindCredential, registry.KindConnector:
		// A connector's message names the connector itself; a credential's
		// names its ref (sys_secret:<id> for a sys_secret row).
		ref := p.Name
		if p.Secret {
			ref = registry.SecretPrefix + p.Name
		}
		return []lane{{
			Channel: ChannelCredential,
			Address: ref,
			payload: func(origin string, _ time.Time) any { return refPayload{OriginNode: origin, Ref: ref} },
		}}
	}
	return nil
}

func metadataAddress(org, typ, name string) string { return org + "\x00" + typ + "\x00" + name }

// encode builds the bus message of l: the envelope, node = origin.
func (l lane) encode(origin string, now time.Time) ([]byte, error) {
	p, err := json.Marshal(l.payload(origin, now))
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", l.Channel, err)
	}
	return json.Marshal(envelope{N: origin, T: now.UnixMilli(), P: p})
}

// observed is what a message seen on the bus names: its channel, address
// and origin. ok is false for a message that is not a lane message.
type observed struct {
	Channel string
	Address string
	Origin  string
}

// decodeObserved reads a message seen on channel (without the prefix).
func decodeObserved(channel string, data []byte) (observed, bool) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return observed{}, false
	}
	o := observed{Channel: channel, Origin: env.N}
	switch channel {
	case ChannelMetadata:
		var p metadataPayload
		if json.Unmarshal(env.P, &p) != nil || p.Event.Name == "" {
			return observed{}, false
		}
		org := ""
		if p.Event.OrganizationID != nil {
			org = *p.Event.OrganizationID
		}
		o.Address = metadataAddress(org, canonicalType(p.Event.Type), p.Event.Name)
	case ChannelDatasource:
		var p namePayload
		if json.Unmarshal(env.P, &p) != nil {
			return observed{}, false
		}
		o.Address = p.Name
	case ChannelCredential:
		var p refPayload
		if json.Unmarshal(env.P, &p) != nil {
			return observed{}, false
		}
		o.Address = p.Ref
	case ChannelAuthz:
	default:
		return observed{}, false
	}
	return o, true
}

// canonicalType folds the plural spellings the platform also accepts
// ("objects") to the singular one the rows use.
func canonicalType(t string) string {
	switch t {
	case "objects", "flows", "views", "permissions", "datasources", "translations", "hooks":
		return strings.TrimSuffix(t, "s")
	}
	return t
}
