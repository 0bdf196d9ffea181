package metadata_test

import (
	"slices"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
	"github.com/objectstack-fleet/reconciler/metadata"
)

// The HotCRM corpus parses whole, and its references are what the bodies
// say, matched exactly and case-sensitively.
func TestCorpus(t *testing.T) {
	t.Parallel()
	items, err := corpus.Load()
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]bool{}
	for _, it := range items {
		if it.Type == "object" {
			objects[it.Name] = true
		}
	}
	var dangling, referAccount []string
	missing := map[string]int{}
	refCount := 0
	for _, c := range items {
		it, err := metadata.Parse(c.Type, c.Name, c.Body, metadata.Limits{})
		if err != nil {
			t.Errorf("%s/%s: %v", c.Type, c.Name, err)
			continue
		}
		if err := metadata.VerifyChecksum(c.Body, mustChecksum(t, c.Body)); err != nil {
			t.Errorf("%s/%s: %v", c.Type, c.Name, err)
		}
		if lean, err := metadata.Refs(c.Type, c.Name, c.Body, metadata.Limits{}); err != nil {
			t.Errorf("%s/%s: Refs: %v", c.Type, c.Name, err)
		} else if !slices.Equal(lean.Refs, it.Refs) || lean.Desired != it.Desired {
			t.Errorf("%s/%s: Refs gives %v %v, Parse %v %v", c.Type, c.Name, lean.Refs, lean.Desired, it.Refs, it.Desired)
		}
		refCount += len(it.Refs)
		held := false
		for _, r := range it.Refs {
			if r.Kind != metadata.RefObject {
				t.Errorf("%s/%s references %v", c.Type, c.Name, r)
			}
			if r.Name == "account" {
				referAccount = append(referAccount, c.Type+"/"+c.Name)
			}
			if !objects[r.Name] && !metadata.IsCodeObject(r.Name, nil) {
				held = true
				missing[r.Name]++
			}
		}
		if held {
			dangling = append(dangling, c.Type+"/"+c.Name)
		}
	}
	// 63 items name an object the corpus does not define: 37 objects (28
	// name "users", which is not sys_user) and 26 hooks (hooks name
	// PascalCase objects such as "Account", which is not "account").
	if len(dangling) != 63 || missing["users"] != 28 || missing["Account"] != 3 {
		t.Errorf("%d items with dangling references (users %d, Account %d), want 63 (28, 3): %v",
			len(dangling), missing["users"], missing["Account"], dangling)
	}
	// 20 items name account: account itself (its parent_id lookup), its 6
	// views and 13 objects with a lookup to it. A change to account
	// rebuilds exactly these.
	if len(referAccount) != 20 || !slices.Contains(referAccount, "object/account") ||
		countPrefix(referAccount, "view/") != 6 || countPrefix(referAccount, "object/") != 14 {
		t.Errorf("%d items reference account, want 20 (account, 6 views, 13 objects): %v", len(referAccount), referAccount)
	}
	t.Logf("%d items, %d references, %d dangling, %d distinct missing objects", len(items), refCount, len(dangling), len(missing))
}

func countPrefix(list []string, prefix string) int {
	n := 0
	for _, s := range list {
		if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

func mustChecksum(t testing.TB, body []byte) string {
	t.Helper()
	sum, err := metadata.Checksum(body)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}
