package snapshottest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

func testMigrateIdempotent(t *testing.T, bk Backend) {
	t.Parallel()
	ctx := context.Background()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		if err := s.CheckSchema(ctx); err != nil {
			t.Fatalf("check schema after migrate: %v", err)
		}
		before := schemaDump(t, url)
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("third migrate: %v", err)
		}
		if after := schemaDump(t, url); after != before {
			t.Fatalf("migrate again changed the schema:\nbefore %s\nafter  %s", before, after)
		}
	})
}

func testCheckSchemaMissing(t *testing.T, bk Backend) {
	t.Parallel()
	ctx := context.Background()
	s, err := snapshot.Open(bk.EmptyURL(t), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckSchema(ctx); !errors.Is(err, snapshot.ErrSchema) {
		t.Fatalf("CheckSchema on an empty store = %v, want ErrSchema", err)
	}
	if _, err := s.Head(ctx); !errors.Is(err, snapshot.ErrSchema) {
		t.Fatalf("Head on an empty store = %v, want ErrSchema", err)
	}
}

// testMigrateHealsTriggers: a source table that lost its triggers (here:
// dropped and re-created by its owner) fails CheckSchema naming them; the
// next Migrate puts them back and its changes surface again.
func testMigrateHealsTriggers(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		Exec(t, url, insSecret, "before", "x")
		Exec(t, url, "DROP TABLE sys_secret")
		err := s.CheckSchema(ctx)
		if !errors.Is(err, snapshot.ErrSchema) || !strings.Contains(err.Error(), "on sys_secret") {
			t.Fatalf("check schema without sys_secret's triggers = %v, want ErrSchema naming them", err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckSchema(ctx); err != nil {
			t.Fatalf("check schema after migrate: %v", err)
		}
		_, c := Relist(t, s)
		Exec(t, url, insSecret, "after", "y")
		got, _ := Poll(t, s, c)
		WantAddrs(t, got, "sys_secret/after")
	})
}
