// Package store is the durable trace of the harness: one SQLite file
// (modernc.org/sqlite, pure Go) or an in-memory database.
//
// A step is committed in one transaction, together with its assistant turn,
// its observations, its budget draw, its events and its checkpoint marker:
// after [Store.CommitStep] returns the step is done, and before it the step
// never happened. Writes are serialised; reads run concurrently with them
// (WAL mode).
//
// The schema is versioned with PRAGMA user_version. Opening an older file
// migrates it in place, additively; opening a file written by newer code is
// an error that wraps [ErrTooNew], never a silent half-read.
//
// Nothing in the store holds a secret: callers store contracts and
// provider names, never keys or headers.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

var (
	// ErrTooNew reports a file whose schema is newer than this code.
	ErrTooNew = errors.New("store: file was written by a newer version")
	// ErrCorrupt reports a file that is not a usable store.
	ErrCorrupt = errors.New("store: file is not a valid store")
	// ErrNotFound reports a run id the store does not hold.
	ErrNotFound = errors.New("store: no such run")
	// ErrClosed reports use of a closed store.
	ErrClosed = errors.New("store: closed")
)

// SchemaError describes a file whose schema this code cannot use.
type SchemaError struct {
	Path      string // the file
	Found     int    // the file's schema version
	Supported int    // the newest version this code reads
}

// Error implements error.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("store: %s has schema version %d; this code reads up to %d", e.Path, e.Found, e.Supported)
}

// Is makes errors.Is(err, ErrTooNew) true.
func (e *SchemaError) Is(target error) bool { return target == ErrTooNew }

// Store is an open trace database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string

	mu     sync.Mutex           // serialises writes; guards the fields below
	w      *sql.Conn            // the one connection that writes
	stmts  map[string]*sql.Stmt // write statements, prepared once
	closed bool
}

// Open opens or creates the store file at path, in WAL mode with a busy
// timeout and foreign keys on, and migrates it to [SchemaVersion].
//
// # Errors
//
// A file newer than this code wraps [ErrTooNew] (as a *SchemaError); a file
// that is not a SQLite database, or whose tables do not match, wraps
// [ErrCorrupt].
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("store: empty path")
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + escapePath(path) + "?" + q.Encode()
	return open(ctx, dsn, path)
}

// OpenMemory opens a fresh in-memory store, private to this Store value.
// It is meant for tests, demos and runs whose trace need not outlive the
// process; it lives until Close.
func OpenMemory(ctx context.Context) (*Store, error) {
	var b [12]byte
	rand.Read(b[:])
	q := url.Values{}
	q.Set("vfs", "memdb")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return open(ctx, "file:/io-harness-"+hex.EncodeToString(b[:])+"?"+q.Encode(), ":memory:")
}

func open(ctx context.Context, dsn, path string) (*Store, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// The writer connection lives as long as the store; an in-memory
	// database lives as long as its last connection.
	s := &Store{db: db, path: path, stmts: map[string]*sql.Stmt{}}
	if s.w, err = db.Conn(ctx); err != nil {
		db.Close()
		return nil, s.classify("open", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.w.Close()
		db.Close()
		return nil, err
	}
	return s, nil
}

// escapePath makes a file path safe inside a "file:" URI.
func escapePath(p string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return r.Replace(p)
}

// migrate brings the file to SchemaVersion in one transaction.
func (s *Store) migrate(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.classify("migrate", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.classify("read schema version", err)
	}
	if version > SchemaVersion {
		return &SchemaError{Path: s.path, Found: version, Supported: SchemaVersion}
	}
	if version == 0 {
		// A file with tables but no version was not written by us.
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type='table'").Scan(&n); err != nil {
			return s.classify("inspect schema", err)
		}
		if n > 0 {
			return fmt.Errorf("%w: %s has tables but no schema version", ErrCorrupt, s.path)
		}
	}
	all := migrations()
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, all[v]); err != nil {
			return fmt.Errorf("%w: %s: migrating to version %d: %v", ErrCorrupt, s.path, v+1, err)
		}
	}
	if version != SchemaVersion {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
			return s.classify("stamp schema version", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.classify("migrate", err)
	}
	return nil
}

// classify wraps a driver error, marking the ones that mean the file is not
// a database.
func (s *Store) classify(op string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "file is not a database") || strings.Contains(msg, "malformed") ||
		strings.Contains(msg, "SQLITE_NOTADB") || strings.Contains(msg, "SQLITE_CORRUPT") {
		return fmt.Errorf("%w: %s: %s: %v", ErrCorrupt, s.path, op, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// Path returns the file the store was opened on, or ":memory:".
func (s *Store) Path() string { return s.path }

// Close closes the store. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, st := range s.stmts {
		st.Close()
	}
	s.w.Close()
	return s.db.Close()
}

// write runs fn in one immediate transaction on the writer connection,
// serialised with every other write of this store. fn writes through
// exec. The transaction is driven with BEGIN and COMMIT statements rather
// than database/sql's Tx so that the statements prepared once on the
// writer connection are used as they are.
func (s *Store) write(ctx context.Context, op string, fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, err := s.w.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return s.classify(op, err)
	}
	err := fn()
	if err == nil {
		if _, err = s.w.ExecContext(ctx, "COMMIT"); err != nil {
			err = s.classify(op, err)
		}
	}
	if err != nil {
		// The rollback must happen even when ctx is what failed.
		s.w.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}

// exec runs one statement of a write transaction through a statement
// prepared once on the writer connection. Only write's fn calls it, under
// mu.
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, ok := s.stmts[query]
	if !ok {
		var err error
		if st, err = s.w.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		s.stmts[query] = st
	}
	return st.ExecContext(ctx, args...)
}
