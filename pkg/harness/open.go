package harness

import (
	"context"
	"fmt"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/memory"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// OpenStore opens the store where names, creating it if need be:
//
//   - a postgres:// or postgresql:// URL is a PostgreSQL database (package
//     store/postgres), shared by the processes of a fleet; its password
//     is never stored, logged or put in an error, and Name() leaves it out;
//   - ":memory:" is a fresh in-memory store (package store/memory),
//     private to the value;
//   - anything else is a SQLite file (package store/sqlite), the default.
//
// This is the one place a store is chosen by name: the spec's callers,
// the C ABI's harness.open and the CLI's --store all come here.
//
// # Errors
//
// The store's own: store.ErrUnavailable for a store the environment keeps
// from being opened (a missing directory, a server that cannot be
// reached or refuses the credentials), store.ErrTooNew and
// store.ErrCorrupt for one this code cannot use.
func OpenStore(ctx context.Context, where string) (store.Store, error) {
	switch {
	case postgres.IsDSN(where):
		return postgres.Open(ctx, where)
	case where == ":memory:":
		return memory.New(), nil
	}
	return sqlite.Open(ctx, where)
}

// OpenStoreReadOnly opens an existing store for reading, as OpenStore
// names it: nothing is written to it, and a store that does not exist is
// store.ErrNotFound (a file) or store.ErrCorrupt (a database without the
// store's tables) rather than a new empty one.
func OpenStoreReadOnly(ctx context.Context, where string) (store.Store, error) {
	switch {
	case postgres.IsDSN(where):
		return postgres.OpenReadOnly(ctx, where)
	case where == ":memory:":
		return nil, fmt.Errorf("%w: an in-memory store has nothing to read", store.ErrNotFound)
	}
	return sqlite.OpenReadOnly(ctx, where)
}

// StoreName is where as it may be printed: a DSN without its credentials,
// a path as it is.
func StoreName(where string) string {
	if postgres.IsDSN(where) {
		return postgres.Redact(where)
	}
	return where
}
