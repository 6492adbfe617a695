package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// catalog is what a reader must leave alone: every column and index of
// the store's schema, and its version.
func catalog(t *testing.T, dsn string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT 'column ' || table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = current_schema()
		UNION ALL SELECT 'index ' || indexname FROM pg_indexes WHERE schemaname = current_schema()
		UNION ALL SELECT 'version ' || version FROM ioh_schema
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A reader of a database of an older schema than it reads refuses it with
// an error that says so and how to migrate it, and leaves it as it was.
// The database is made with the version-1 DDL as it shipped (schemaV1,
// which is never edited). The negative control is the same open through a
// reader that migrates first, as OpenReadOnly once did: the catalog
// changes, and the test sees it.
func TestReadingAnOlderSchemaWritesNothing(t *testing.T) {
	ctx := context.Background()
	migrating := func(ctx context.Context, dsn string) (*Store, error) { return openReadOnly(ctx, dsn, true) }
	for _, tc := range []struct {
		name    string
		open    func(context.Context, string) (*Store, error)
		control bool
	}{
		{"OpenReadOnly", OpenReadOnly, false},
		{"control: migrate first", migrating, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pg.DSN(t)
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(ctx, schemaV1); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(ctx, `UPDATE ioh_schema SET version = 1`); err != nil {
				t.Fatal(err)
			}
			c.Close(ctx)
			before := catalog(t, dsn)
			s, err := tc.open(ctx, dsn)
			if s != nil {
				s.Close()
			}
			after := catalog(t, dsn)
			changed := strings.Join(after, "\n") != strings.Join(before, "\n")
			if tc.control {
				if !changed {
					t.Fatalf("the control migrated the database, and the test did not see it change (%d catalog lines)", len(after))
				}
				t.Logf("the control changed the catalog: %d lines before, %d after", len(before), len(after))
				return
			}
			var se *store.SchemaError
			switch {
			case !errors.Is(err, store.ErrTooOld) || errors.Is(err, store.ErrTooNew) || !errors.As(err, &se) || se.Found != 1:
				t.Errorf("a version-1 database, read-only: %v; want a *SchemaError of version 1 wrapping ErrTooOld", err)
			case !strings.Contains(err.Error(), "open it once for writing"):
				t.Errorf("the refusal does not say how to migrate: %v", err)
			}
			if changed {
				t.Errorf("reading the version-1 database changed it (-before +after):\n%s", cmp.Diff(before, after))
			}
		})
	}
}

// A database of a schema from ReadableSince on is read as it is: the
// versions after it add nothing a read sees (version 3 adds an index), so
// a reader neither refuses nor migrates it.
func TestAReadableOlderSchemaIsReadAsItIs(t *testing.T) {
	ctx := context.Background()
	dsn := pg.DSN(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(migrations()[:ReadableSince:ReadableSince], `UPDATE ioh_schema SET version = 2`) {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	c.Close(ctx)
	before := catalog(t, dsn)
	s, err := OpenReadOnly(ctx, dsn)
	if err != nil {
		t.Fatalf("a version-%d database, read-only: %v", ReadableSince, err)
	}
	if runs, err := s.Runs(ctx, store.RunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("Runs = %v, %v", runs, err)
	}
	if _, err := s.Decided(ctx, 10); err != nil {
		t.Errorf("Decided: %v", err)
	}
	s.Close()
	if after := catalog(t, dsn); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("reading the version-%d database changed it (-before +after):\n%s", ReadableSince, cmp.Diff(before, after))
	}
}
