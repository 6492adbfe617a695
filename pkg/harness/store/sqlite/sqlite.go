// Package sqlite is the embedded store of the harness: one SQLite file
// (modernc.org/sqlite, pure Go), or an in-memory database, implementing
// [store.Store].
//
// A file store is three files: the database (the path given), its
// write-ahead log (path-wal) and its shared-memory index (path-shm). A
// committed step may live only in the log until a checkpoint copies it
// into the database, so a copy of the store must take all three together
// (or use [Store.Check] on a quiet store first); copying the database file
// alone after a crash loses committed steps.
//
// Writes are serialised on one connection; reads run concurrently with
// them (WAL mode). The schema is versioned with PRAGMA user_version.
// Opening an older file with [Open] migrates it in place, additively;
// [OpenReadOnly] reads an older file as it is and never migrates it.
// Opening a file written by newer code is an error that wraps
// [store.ErrTooNew], never a silent half-read.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Store is an open SQLite store. It is safe for concurrent use.
type Store struct {
	db       *sql.DB
	path     string
	readOnly bool

	mu     sync.Mutex           // serialises writes; guards the fields below
	w      *sql.Conn            // the one connection that writes
	stmts  map[string]*sql.Stmt // write statements, prepared once
	closed bool
	wait   waitFunc // between tries of a statement SQLite refused as busy

	qmu     sync.Mutex // guards the write queue
	queue   []*pending // writes waiting for the next batch
	leading bool       // a goroutine is committing batches
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the store file at path, in WAL mode with a busy
// timeout and foreign keys on, and migrates it to [SchemaVersion].
// Other processes may use the file at once: Open, and every write of
// the store, waits for the file while it is busy, until its context is
// done; it never fails for the file being busy alone.
//
// A trace holds prompts and tool output, so a new file is private: mode
// 0600 whatever the umask, and SQLite gives its -wal and -shm files the
// database file's mode. An existing file keeps the mode its owner gave
// it. Open creates no directory.
//
// # Errors
//
// A file newer than this code wraps [store.ErrTooNew] (as a
// *store.SchemaError); a file that is not a SQLite database, or whose
// tables are not a store's, wraps [store.ErrCorrupt]; a path the
// environment keeps from being opened (a missing directory, a directory,
// a read-only or full filesystem) wraps [store.ErrUnavailable] and names
// the path.
func Open(ctx context.Context, path string) (*Store, error) {
	return openMode(ctx, path, 0o600)
}

// openMode is Open, making a missing file with mode perm; perm 0, for a
// test's control only, leaves it to SQLite, which makes it 0644 less the
// umask.
func openMode(ctx context.Context, path string, perm fs.FileMode) (*Store, error) {
	if err := checkPath(path, true); err != nil {
		return nil, err
	}
	if perm != 0 {
		if err := create(path, perm); err != nil {
			return nil, err
		}
	}
	return open(ctx, fileDSN(path, false), path, false)
}

// create makes path, empty, with mode perm exactly, unless it exists.
func create(path string, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return fmt.Errorf("%w: %s: %v", store.ErrUnavailable, path, err)
	}
	defer f.Close()
	if err := f.Chmod(perm); err != nil { // the umask may have taken bits of perm
		return fmt.Errorf("%w: %s: %v", store.ErrUnavailable, path, err)
	}
	return nil
}

// OpenReadOnly opens an existing store file for reading: no write of any
// kind reaches the file, and a file that is not a store (an empty file, a
// file of another program) is refused with [store.ErrCorrupt] and left
// as it was. A store of an older schema is read as it is, never migrated:
// what it lacks reads as a migration would fill it in (no leases, no
// agents, defaults), and the version that wrote it still opens it.
// Like any reader of a WAL-mode SQLite file, it may leave the file's
// -wal and -shm beside it.
func OpenReadOnly(ctx context.Context, path string) (*Store, error) {
	return openReadOnly(ctx, path, false)
}

// openReadOnly is OpenReadOnly; migrate, for a test only, migrates an
// older file in place first, as OpenReadOnly once did, to show that the
// test sees the writes that reading through the overlay avoids.
func openReadOnly(ctx context.Context, path string, migrate bool) (*Store, error) {
	if err := checkPath(path, false); err != nil {
		return nil, err
	}
	if migrate {
		w, err := Open(ctx, path)
		if err != nil {
			return nil, err
		}
		w.Close()
	}
	return open(ctx, fileDSN(path, true), path, true)
}

// fileDSN is the driver's name for a store file.
func fileDSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	if readOnly {
		// query_only is set once the connection has its overlay (see
		// readers), which lives in the temp schema, kept in memory.
		q.Set("mode", "ro")
		q.Add("_pragma", "temp_store(2)")
	} else {
		// WAL is set once the file is known to be a store (see migrate):
		// it changes the file, and a file that is not ours stays as it is.
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + escapePath(path) + "?" + q.Encode()
}

// checkPath says, before the driver tries, what about the environment
// keeps path from being a store: its directory is missing, it is a
// directory, or (for a reader) it does not exist or is empty.
func checkPath(path string, create bool) error {
	if path == "" {
		return fmt.Errorf("%w: the store's path is empty", store.ErrUnavailable)
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%w: %s is a directory, not a store file", store.ErrUnavailable, path)
	case err == nil && !create && fi.Size() == 0:
		return fmt.Errorf("%w: %s is empty, not a store", store.ErrCorrupt, path)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s: %v", store.ErrUnavailable, path, err)
	case !create:
		return fmt.Errorf("%w: %s does not exist", store.ErrNotFound, path)
	}
	dir := filepath.Dir(path)
	if di, err := os.Stat(dir); err != nil || !di.IsDir() {
		return fmt.Errorf("%w: %s: the directory %s does not exist", store.ErrUnavailable, path, dir)
	}
	return nil
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
	return open(ctx, "file:/io-harness-"+hex.EncodeToString(b[:])+"?"+q.Encode(), ":memory:", false)
}

func open(ctx context.Context, dsn, path string, readOnly bool) (*Store, error) {
	return openWait(ctx, dsn, path, readOnly, backoff)
}

// openWait is open with wait between tries of a busy statement; a test
// gives its own, to see the store wait or to switch the retry off.
func openWait(ctx context.Context, dsn, path string, readOnly bool, wait waitFunc) (*Store, error) {
	var db *sql.DB
	if readOnly {
		db = sql.OpenDB(newReaders(dsn))
	} else {
		var err error
		if db, err = sql.Open("sqlite", dsn); err != nil {
			return nil, fmt.Errorf("%w: open %s: %v", store.ErrUnavailable, path, err)
		}
	}
	// The writer connection lives as long as the store; an in-memory
	// database lives as long as its last connection.
	s := &Store{db: db, path: path, readOnly: readOnly, stmts: map[string]*sql.Stmt{}, wait: wait}
	var err error
	if s.w, err = db.Conn(ctx); err != nil {
		db.Close()
		return nil, s.classify("open", err)
	}
	if readOnly {
		err = s.checkSchema(ctx)
	} else {
		err = s.migrate(ctx)
	}
	if err != nil {
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

// checkSchema checks, reading only, that the file is a store this code
// reads: of this schema version or an older one.
func (s *Store) checkSchema(ctx context.Context) error {
	// One statement, so one read transaction, as in migrate.
	var version, tables int
	if err := s.w.QueryRowContext(ctx, "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='runs')").Scan(&version, &tables); err != nil {
		return s.classify("inspect schema", err)
	}
	switch {
	case version == 0 || tables == 0:
		return fmt.Errorf("%w: %s is a SQLite file, but not a store of this program", store.ErrCorrupt, s.path)
	case version > SchemaVersion:
		return &store.SchemaError{Path: s.path, Found: version, Supported: SchemaVersion}
	}
	return nil
}

// migrate brings the file to SchemaVersion in one transaction, after
// checking that it is empty or a store and putting it in WAL mode.
func (s *Store) migrate(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// One statement, so one read transaction: read apart, another
	// process's migration committing between the two reads would pair
	// no version with its tables.
	var version, tables int
	if err := s.w.QueryRowContext(ctx, "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema WHERE type='table')").Scan(&version, &tables); err != nil {
		return s.classify("inspect schema", err)
	}
	switch {
	case version == 0 && tables > 0:
		return fmt.Errorf("%w: %s has tables but no schema version: it is not a store of this program", store.ErrCorrupt, s.path)
	case version > SchemaVersion:
		return &store.SchemaError{Path: s.path, Found: version, Supported: SchemaVersion}
	}
	if s.path != ":memory:" {
		// On a new file this upgrades a read transaction to the write
		// lock, which SQLite refuses at once if another process holds
		// it.
		var mode string
		if err := s.retryBusy(ctx, func() error {
			return s.w.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		}); err != nil {
			return s.classify("set WAL mode", err)
		}
	}
	var tx *sql.Tx
	err := s.retryBusy(ctx, func() (err error) {
		tx, err = s.w.BeginTx(ctx, nil)
		return err
	})
	if err != nil {
		return s.classify("migrate", err)
	}
	defer tx.Rollback()
	// Another process may have migrated the file meanwhile: read the
	// version again inside the transaction.
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.classify("read schema version", err)
	}
	if version > SchemaVersion {
		return &store.SchemaError{Path: s.path, Found: version, Supported: SchemaVersion}
	}
	all := migrations()
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, all[v]); err != nil {
			return fmt.Errorf("%w: %s: migrating to version %d: %v", store.ErrCorrupt, s.path, v+1, err)
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

// classify wraps a driver error: the file is not a database
// (store.ErrCorrupt), or the environment keeps it from being used
// (store.ErrUnavailable), naming the path either way.
func (s *Store) classify(op string, err error) error {
	msg := err.Error()
	switch {
	case isBusy(err):
		// Given up waiting: the error says why (its context is done).
		return fmt.Errorf("%w: %s: %s: %w", store.ErrUnavailable, s.path, op, err)
	case strings.Contains(msg, "file is not a database") || strings.Contains(msg, "malformed") ||
		strings.Contains(msg, "SQLITE_NOTADB") || strings.Contains(msg, "SQLITE_CORRUPT"):
		return fmt.Errorf("%w: %s: %s: %v", store.ErrCorrupt, s.path, op, err)
	case strings.Contains(msg, "unable to open") || strings.Contains(msg, "readonly") || strings.Contains(msg, "read-only") ||
		strings.Contains(msg, "disk is full") || strings.Contains(msg, "disk I/O") || strings.Contains(msg, "locked") ||
		strings.Contains(msg, "SQLITE_CANTOPEN") || strings.Contains(msg, "SQLITE_FULL") || strings.Contains(msg, "SQLITE_IOERR") ||
		strings.Contains(msg, "SQLITE_READONLY") || strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "SQLITE_PERM"):
		return fmt.Errorf("%w: %s: %s: %v", store.ErrUnavailable, s.path, op, err)
	}
	return fmt.Errorf("store %s: %s: %w", s.path, op, err)
}

// Name returns the file the store was opened on, or ":memory:".
func (s *Store) Name() string { return s.path }

// Durable reports whether the store is a file.
func (s *Store) Durable() bool { return s.path != ":memory:" }

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
// writer connection are used as they are. A lease, when given, must still
// be the run's: otherwise nothing is written and the error wraps
// store.ErrFenced.
func (s *Store) write(ctx context.Context, op string, l *store.Lease, fn func() error) error {
	return s.writeSync(ctx, op, l, true, fn)
}

// writeSync is write, with the commit synced to disk or not. An unsynced
// commit survives the process's crash (the log is in the kernel's cache)
// but not the machine's; the next synced commit syncs it too.
//
// Writes that arrive while another is being committed are committed
// together, in one transaction and one sync (group commit): each in a
// savepoint of its own, so that one that fails — fenced out, or its fn
// failing — rolls back alone and the others land. A write returns once
// the transaction that holds it has committed. This is what lets a tree
// of a hundred agents commit its steps at once without queueing a
// hundred syncs.
func (s *Store) writeSync(ctx context.Context, op string, l *store.Lease, synced bool, fn func() error) error {
	w := &pending{ctx: ctx, op: op, l: l, synced: synced, fn: fn, done: make(chan struct{}), lead: make(chan struct{})}
	s.qmu.Lock()
	s.queue = append(s.queue, w)
	lead := !s.leading
	s.leading = true
	s.qmu.Unlock()
	if !lead {
		select {
		case <-w.done:
			return w.err
		case <-w.lead: // handed the lead; its own write is in the next batch
		}
	}
	for {
		s.qmu.Lock()
		batch := s.queue
		s.queue = nil
		s.qmu.Unlock()
		s.commit(batch)
		select {
		case <-w.done:
		default:
			continue // its own write was queued after the batch began
		}
		// Done: hand the lead to the first write that waits, if any.
		s.qmu.Lock()
		if len(s.queue) > 0 {
			close(s.queue[0].lead)
		} else {
			s.leading = false
		}
		s.qmu.Unlock()
		return w.err
	}
}

// pending is a write waiting for its batch.
type pending struct {
	ctx    context.Context
	op     string
	l      *store.Lease
	synced bool
	fn     func() error
	err    error
	done   chan struct{} // closed when err is set
	lead   chan struct{} // closed when this write's goroutine is to lead
}

// commit writes a batch in one transaction, each write in a savepoint of
// its own, and tells every write how it ended.
func (s *Store) commit(batch []*pending) {
	if len(batch) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	bg := context.Background()
	end := func(err error) {
		for _, w := range batch {
			if w.err == nil {
				w.err = err
			}
			close(w.done)
		}
	}
	switch {
	case s.closed:
		end(store.ErrClosed)
		return
	case s.readOnly:
		for _, w := range batch {
			w.err = fmt.Errorf("%w: %s: %s", store.ErrReadOnly, s.path, w.op)
		}
		end(nil)
		return
	}
	synced := false
	for _, w := range batch {
		synced = synced || w.synced
	}
	if !synced && s.path != ":memory:" {
		if _, err := s.exec(bg, "PRAGMA synchronous=NORMAL"); err != nil {
			end(s.classify(batch[0].op, err))
			return
		}
		defer s.exec(bg, "PRAGMA synchronous=FULL")
	}
	live, stop := anyLive(batch)
	err := s.retryBusy(live, func() error {
		_, err := s.exec(bg, "BEGIN IMMEDIATE")
		return err
	})
	stop()
	if err != nil {
		end(s.classify(batch[0].op, err))
		return
	}
	landed := 0
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.err = err
			continue
		}
		if _, err := s.exec(bg, "SAVEPOINT write"); err != nil {
			w.err = s.classify(w.op, err)
			continue
		}
		err := s.fence(w.ctx, w.l)
		if err == nil {
			err = w.fn()
		}
		if err != nil {
			s.w.ExecContext(bg, "ROLLBACK TO write")
			w.err = err
		} else {
			landed++
		}
		s.w.ExecContext(bg, "RELEASE write")
	}
	if landed > 0 {
		if _, err = s.exec(bg, "COMMIT"); err != nil {
			err = s.classify(batch[0].op, err)
		}
	} else {
		_, err = s.w.ExecContext(bg, "ROLLBACK")
		err = nil
	}
	if err != nil {
		// The rollback must happen even when a context is what failed.
		s.w.ExecContext(bg, "ROLLBACK")
	}
	end(err)
}

// fence checks, inside a write, that l is still the run's lease.
func (s *Store) fence(ctx context.Context, l *store.Lease) error {
	if l == nil {
		return nil
	}
	var gen int64
	err := s.w.QueryRowContext(ctx, `SELECT generation FROM leases WHERE run_id=?`, l.RunID).Scan(&gen)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: run %s has no lease", store.ErrFenced, l.RunID)
	case err != nil:
		return s.classify("check the lease", err)
	case gen != l.Generation:
		return fmt.Errorf("%w: run %s is at lease generation %d, this driver holds %d", store.ErrFenced, l.RunID, gen, l.Generation)
	case l.Agent == "":
		return nil
	}
	var root string
	err = s.w.QueryRowContext(ctx, `SELECT root_id FROM runs WHERE id=?`, l.Agent).Scan(&root)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: run %s", store.ErrNotFound, l.Agent)
	case err != nil:
		return s.classify("check the lease", err)
	case root != l.RunID:
		return fmt.Errorf("%w: run %s is not an agent of the tree of %s", store.ErrFenced, l.Agent, l.RunID)
	}
	return nil
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
