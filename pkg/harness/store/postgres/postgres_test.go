package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/initorigin/io-harness-go/internal/pgtest"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/storetest"
)

// pg is this binary's PostgreSQL server, started on first use.
var pg = &pgtest.Server{}

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// open opens a store on a fresh schema, closed when the test ends.
func open(t *testing.T) (*Store, string) {
	t.Helper()
	dsn := pg.DSN(t)
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(context.Background(), pg.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
