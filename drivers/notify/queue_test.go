package notify

import (
	"encoding/json"
	"testing"

	"github.com/objectstack-fleet/reconciler/reconcile"
)

// FuzzMerge decodes two change sets as the webhook would send them and
// checks that merging keeps one change per kind and key, the last one.
func FuzzMerge(f *testing.F) {
	f.Add([]byte(`{"replica":"a","cursor":"1","changes":[{"kind":"connector","key":"x","action":"create","revision":1,"state":"ready"}]}`),
		[]byte(`{"replica":"a","cursor":"2","changes":[{"kind":"connector","key":"x","action":"evict","revision":2,"state":"pending"},{"kind":"engine","key":"x"}]}`))
	f.Add([]byte(`{}`), []byte(`{"changes":null}`))
	f.Add([]byte(`{"changes":[{"kind":"a","key":"k"},{"kind":"a","key":"k"}]}`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var x, y reconcile.ChangeSet
		if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
			return
		}
		m := merge(merge(nil, x), y)
		last := map[string]reconcile.Change{}
		for _, c := range append(append([]reconcile.Change{}, x.Changes...), y.Changes...) {
			last[string(c.Kind)+"\x00"+c.Key] = c
		}
		if len(m.Changes) != len(last) || m.Cursor != y.Cursor || m.ReplicaID != y.ReplicaID {
			t.Fatalf("merge(%s, %s) = %+v", a, b, m)
		}
		for _, c := range m.Changes {
			if last[string(c.Kind)+"\x00"+c.Key] != c {
				t.Fatalf("change %+v is not the last for its key", c)
			}
		}
		if _, err := json.Marshal(payload(*m)); err != nil {
			t.Fatal(err)
		}
	})
}
