package postgres_test

import (
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/postgres"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestEncrypted: a connection with sslmode=disable to the test server on
// this host reads plaintext and local.
func TestEncrypted(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := snapshot.Open(url+sep+"sslmode=disable", snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	enc, local, err := s.(*postgres.Store).Encrypted(snapshottest.Ctx(t))
	if err != nil || enc || !local {
		t.Fatalf("Encrypted = %v, %v, %v; want plaintext on this host", enc, local, err)
	}
}
