package snapshot

import "encoding/json"

// DecodeCounts reads a heartbeat row's counts leniently: a member that is
// not an integer is left out, and counts that are not a JSON object read
// as none, so that one bad row (written by anyone who can write the
// table) never fails the fleet's listing.
func DecodeCounts(s string) map[string]int64 {
	var raw map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &raw) != nil {
		return nil
	}
	out := make(map[string]int64, len(raw))
	for k, v := range raw {
		var n int64
		if json.Unmarshal(v, &n) == nil {
			out[k] = n
		}
	}
	return out
}

// EncodeCounts is a heartbeat row's counts column: a JSON object ("{}"
// for none), the form DecodeCounts reads.
func EncodeCounts(c map[string]int64) string {
	if c == nil {
		return "{}"
	}
	b, _ := json.Marshal(c)
	return string(b)
}
