// Package postgres is the store of the harness on PostgreSQL
// (github.com/jackc/pgx/v5), implementing [store.Store] for runs driven by
// many processes on many machines: a fleet of workers (package fleet)
// shares one database.
//
// The store passes the same conformance suite as the embedded SQLite
// store. Its tables (ioh_*) live in the first schema of the connection's
// search_path, which a DSN sets with ?search_path=NAME; its schema is
// versioned on its own (ioh_schema), migrated under an advisory lock so
// that workers starting together migrate once, and a database written by
// newer code is [store.ErrTooNew].
//
// # Transactions
//
// Every write is one transaction, sent as one pipeline: the statements of
// a step — the lease check, the step, its observations, attempts, spend,
// intents, approvals, events and, when it ends the run, the outcome — go
// to the server in one round trip and commit together or not at all. A
// commit returns once the server has flushed it to its log.
//
// # The lease
//
// A run's lease is a row of ioh_leases. Its expiry is computed by the
// database's clock (clock_timestamp() + ttl), and whether it has expired
// is decided by the same clock, so no worker's clock is trusted; only a
// driver on the same host, whose process can be seen to be gone, is taken
// over before the expiry. Taking a lease locks its row (SELECT ... FOR
// UPDATE) and raises its generation; every write holds the row shared and
// checks the generation (ioh_fence), so a write and a takeover are
// ordered by the row lock, and a superseded driver's writes fail with
// [store.ErrFenced] and change nothing.
//
// # Credentials
//
// The DSN's password, and any password parameter, is never stored, logged
// or put in an error: [Store.Name] is the DSN without them ([Redact]), and
// every error the store returns has them replaced.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Store is an open PostgreSQL store. It is safe for concurrent use by
// many goroutines, and many processes may open the same database.
type Store struct {
	pool     *pgxpool.Pool
	name     string   // the DSN without credentials
	secrets  []string // the DSN's credentials, scrubbed from every error
	readOnly bool
	closed   atomic.Bool

	// localClock, when set, makes Acquire judge a held lease by this
	// process's clock (time.Now) instead of the database's: the
	// protection switched off, which only the negative control of the
	// tests asks for.
	localClock bool
}

var _ store.Store = (*Store)(nil)

// defaultMaxConns is the pool's size when the DSN sets no pool_max_conns:
// a worker drives many runs, each renewing its lease beside its commits.
const defaultMaxConns = 32

// Open connects to the database dsn names (a postgres:// URL), creates or
// migrates the store's tables to [SchemaVersion], and returns the store.
//
// # Errors
//
// A DSN that does not parse is [store.ErrUnavailable] with the reason; a
// server that cannot be reached or refuses the credentials wraps
// [store.ErrUnavailable]; a database written by newer code wraps
// [store.ErrTooNew] (as a *store.SchemaError); tables that are not a
// store's wrap [store.ErrCorrupt]. No error holds the DSN's password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	s, err := connect(ctx, dsn, false)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

// OpenReadOnly connects for reading only: nothing is migrated, every
// write is [store.ErrReadOnly], and the connections themselves are
// read-only (default_transaction_read_only). A database without the
// store's tables is [store.ErrCorrupt]. One of an older schema than
// [ReadableSince] is refused with an error that wraps [store.ErrTooOld]
// (a *store.SchemaError) and says how to migrate it — open it once for
// writing, as [Open] and io-harness worker do — and is left as it was.
func OpenReadOnly(ctx context.Context, dsn string) (*Store, error) {
	return openReadOnly(ctx, dsn, false)
}

// ReadableSince is the oldest schema version a reader of this code reads
// as it is: the versions after it add nothing a read would see.
const ReadableSince = 2

// openReadOnly is OpenReadOnly; migrate, for a test only, migrates an
// older database first, as OpenReadOnly once did, to show that the test
// sees the writes the refusal avoids.
func openReadOnly(ctx context.Context, dsn string, migrate bool) (*Store, error) {
	if migrate {
		w, err := Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		w.Close()
	}
	s, err := connect(ctx, dsn, true)
	if err != nil {
		return nil, err
	}
	version, err := s.version(ctx)
	switch {
	case err != nil:
	case version == 0:
		err = fmt.Errorf("%w: %s holds no store (no ioh_schema table in the search_path's schema)", store.ErrCorrupt, s.name)
	case version > SchemaVersion:
		err = &store.SchemaError{Path: s.name, Found: version, Supported: SchemaVersion}
	case version < ReadableSince:
		err = fmt.Errorf("%w; a reader does not migrate it: open it once for writing (postgres.Open, or io-harness worker --store) to migrate it in place",
			&store.SchemaError{Path: s.name, Found: version, Supported: SchemaVersion})
	}
	if err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

func connect(ctx context.Context, dsn string, readOnly bool) (*Store, error) {
	s := &Store{name: Redact(dsn), secrets: secrets(dsn), readOnly: readOnly}
	if !IsDSN(dsn) {
		return nil, fmt.Errorf("%w: %s is not a postgres:// URL", store.ErrUnavailable, s.name)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", store.ErrUnavailable, s.scrub(err.Error()))
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "io-harness"
	}
	if readOnly {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, s.classify("connect", err)
	}
	if err := s.pool.Ping(ctx); err != nil {
		s.pool.Close()
		return nil, s.classify("connect", err)
	}
	return s, nil
}

// version reads the schema version: 0 for a schema without the store.
func (s *Store) version(ctx context.Context) (int, error) {
	var has, runs bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('ioh_schema') IS NOT NULL, to_regclass('ioh_runs') IS NOT NULL`).Scan(&has, &runs); err != nil {
		return 0, s.classify("inspect schema", err)
	}
	switch {
	case !has && runs:
		return 0, fmt.Errorf("%w: %s has an ioh_runs table but no schema version: it is not a store of this program", store.ErrCorrupt, s.name)
	case !has:
		return 0, nil
	}
	var version int
	if err := s.pool.QueryRow(ctx, `SELECT version FROM ioh_schema LIMIT 1`).Scan(&version); err != nil {
		return 0, fmt.Errorf("%w: %s: read schema version: %s", store.ErrCorrupt, s.name, s.scrub(err.Error()))
	}
	return version, nil
}

// migrate brings the schema to SchemaVersion in one transaction, under a
// transaction-scoped advisory lock, so that processes opening the store
// at once migrate it once.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.classify("migrate", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.io-harness-store'))`); err != nil {
		return s.classify("lock the schema", err)
	}
	var version int
	var has bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('ioh_schema') IS NOT NULL`).Scan(&has); err != nil {
		return s.classify("inspect schema", err)
	}
	if has {
		if err := tx.QueryRow(ctx, `SELECT version FROM ioh_schema LIMIT 1`).Scan(&version); err != nil {
			return fmt.Errorf("%w: %s: read schema version: %s", store.ErrCorrupt, s.name, s.scrub(err.Error()))
		}
	} else {
		var runs bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('ioh_runs') IS NOT NULL`).Scan(&runs); err != nil {
			return s.classify("inspect schema", err)
		}
		if runs {
			return fmt.Errorf("%w: %s has an ioh_runs table but no schema version: it is not a store of this program", store.ErrCorrupt, s.name)
		}
	}
	if version > SchemaVersion {
		return &store.SchemaError{Path: s.name, Found: version, Supported: SchemaVersion}
	}
	if version == SchemaVersion {
		return nil
	}
	all := migrations()
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, all[v]); err != nil {
			return fmt.Errorf("%w: %s: migrating to version %d: %s", store.ErrCorrupt, s.name, v+1, s.scrub(err.Error()))
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE ioh_schema SET version = $1`, SchemaVersion); err != nil {
		return s.classify("stamp schema version", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.classify("migrate", err)
	}
	return nil
}

// Name returns the DSN without its credentials.
func (s *Store) Name() string { return s.name }

// Durable reports true: a commit outlives the process once it returns.
func (s *Store) Durable() bool { return true }

// Close closes the pool. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.pool.Close()
	return nil
}

// Pool returns the store's connection pool, for a job engine that keeps
// its tables in the same database (package fleet). Closing the store
// closes it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// The SQLSTATE codes the store's own checks raise (ioh_check, ioh_fence).
const (
	codeFenced     = "IH001"
	codeConflict   = "IH002"
	codeNotFound   = "IH003"
	codeNotPending = "IH004"
)

// scrub removes the DSN's credentials from msg.
func (s *Store) scrub(msg string) string { return scrub(msg, s.secrets) }

// classify turns a driver error into the store's: its own checks' codes
// into their sentinels, a duplicate key into store.ErrConflict, a server
// that cannot be reached, refuses the credentials or is shutting down
// into store.ErrUnavailable. The driver's error is never wrapped, only
// its message, with the credentials scrubbed.
func (s *Store) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() {
		return fmt.Errorf("%w: %s", store.ErrClosed, op)
	}
	msg := s.scrub(err.Error())
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		m := s.scrub(pe.Message)
		switch {
		case pe.Code == codeFenced:
			return fmt.Errorf("%w: %s", store.ErrFenced, m)
		case pe.Code == codeConflict:
			return fmt.Errorf("%w: %s", store.ErrConflict, m)
		case pe.Code == codeNotFound:
			return fmt.Errorf("%w: %s", store.ErrNotFound, m)
		case pe.Code == codeNotPending:
			return fmt.Errorf("%w: %s", store.ErrNotPending, m)
		case pe.Code == "23505": // unique_violation
			return fmt.Errorf("%w: %s: %s (%s)", store.ErrConflict, op, m, pe.ConstraintName)
		case pe.Code == "25006": // read_only_sql_transaction
			return fmt.Errorf("%w: %s: %s", store.ErrReadOnly, s.name, op)
		case pe.Code == "42P01" || pe.Code == "42883": // undefined table or function
			return fmt.Errorf("%w: %s: %s: %s", store.ErrCorrupt, s.name, op, m)
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "28"), strings.HasPrefix(pe.Code, "53"),
			strings.HasPrefix(pe.Code, "57"), pe.Code == "3D000", pe.Code == "40001", pe.Code == "40P01":
			return fmt.Errorf("%w: %s: %s: %s", store.ErrUnavailable, s.name, op, m)
		}
		return fmt.Errorf("store %s: %s: %s (SQLSTATE %s)", s.name, op, m, pe.Code)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("store %s: %s: %w", s.name, op, context.Canceled)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("store %s: %s: %w", s.name, op, context.DeadlineExceeded)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || strings.Contains(msg, "closed pool") ||
		strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection refused") {
		return fmt.Errorf("%w: %s: %s: %s", store.ErrUnavailable, s.name, op, msg)
	}
	return fmt.Errorf("store %s: %s: %s", s.name, op, msg)
}

// writable says why the store may not write now.
func (s *Store) writable(op string) error {
	switch {
	case s.closed.Load():
		return fmt.Errorf("%w: %s", store.ErrClosed, op)
	case s.readOnly:
		return fmt.Errorf("%w: %s: %s", store.ErrReadOnly, s.name, op)
	}
	return nil
}

// readable says why the store may not read now.
func (s *Store) readable(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: %s", store.ErrClosed, op)
	}
	return nil
}

// batch starts the statements of one write: when l is given, the first
// holds the run's lease row and checks its generation.
func batch(l *store.Lease) *pgx.Batch {
	b := &pgx.Batch{}
	switch {
	case l == nil:
	case l.Agent != "":
		b.Queue(`SELECT ioh_fence_agent($1, $2, $3)`, l.RunID, l.Generation, l.Agent)
	default:
		b.Queue(`SELECT ioh_fence($1, $2)`, l.RunID, l.Generation)
	}
	return b
}

// send runs b as one transaction in one round trip: the statements are
// pipelined and run in the implicit transaction of the pipeline, so the
// first that fails undoes every one before it. read, when set, reads the
// result of statement i instead of the default, which executes it; it is
// called for each statement in order.
func (s *Store) send(ctx context.Context, op string, b *pgx.Batch, read func(i int, br pgx.BatchResults) error) error {
	if err := s.writable(op); err != nil {
		return err
	}
	br := s.pool.SendBatch(ctx, b)
	var first error
	for i := range b.Len() {
		var err error
		if read != nil {
			err = read(i, br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			first = err
			break
		}
	}
	if err := br.Close(); first == nil {
		first = err
	}
	return s.classify(op, first)
}
