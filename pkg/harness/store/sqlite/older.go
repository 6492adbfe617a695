package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"

	"modernc.org/sqlite"
)

// A reader never migrates. A file of an older schema is read through an
// overlay in each connection's temp schema, which SQLite searches before
// the file's own: a table the file lacks is an empty temp table, and a
// table that lacks columns is a temp view that gives each missing column
// the default its migration gives it. Migrations only add tables,
// indexes and columns with defaults (see migrations), so the overlay
// reads exactly what the file would hold once migrated, and the file
// stays as it was: an older version still opens it.

// readers opens the read-only connections of a store file: each is
// opened mode=ro, gets the overlay its file needs, and is then made
// query_only.
type readers struct {
	dsn string
	drv *sqlite.Driver

	mu     sync.Mutex
	newest []table // the tables of SchemaVersion, made once when needed
}

func newReaders(dsn string) *readers {
	c := &readers{dsn: dsn, drv: &sqlite.Driver{}}
	c.drv.RegisterConnectionHook(c.prepare)
	return c
}

// Connect implements driver.Connector.
func (c *readers) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }

// Driver implements driver.Connector.
func (c *readers) Driver() driver.Driver { return c.drv }

// prepare readies one connection: the overlay, if the file is older, then
// query_only.
func (c *readers) prepare(conn sqlite.ExecQuerierContext, _ string) error {
	ctx := context.Background()
	rows, err := query(ctx, conn, "PRAGMA main.user_version")
	if err != nil {
		return err
	}
	version := rows[0][0].(int64)
	if version > 0 && version < SchemaVersion {
		stmts, err := c.overlay(ctx, conn)
		if err != nil {
			return err
		}
		for _, q := range stmts {
			if _, err := conn.ExecContext(ctx, q, nil); err != nil {
				return fmt.Errorf("overlay the version %d schema: %s: %w", version, q, err)
			}
		}
	}
	_, err = conn.ExecContext(ctx, "PRAGMA query_only = 1", nil)
	return err
}

// table is a table of a schema: its name, its CREATE statement, and its
// columns with their defaults.
type table struct {
	name     string
	sql      string
	cols     []string
	defaults map[string]string // the column's default as SQL; absent: NULL
}

// overlay returns the statements that make a connection to an older file
// read as the newest schema.
func (c *readers) overlay(ctx context.Context, conn sqlite.ExecQuerierContext) ([]string, error) {
	newest, err := c.newestTables(ctx)
	if err != nil {
		return nil, err
	}
	have, err := tables(ctx, conn, "main")
	if err != nil {
		return nil, err
	}
	var stmts []string
	for _, t := range newest {
		i := slices.IndexFunc(have, func(h table) bool { return h.name == t.name })
		if i < 0 {
			stmts = append(stmts, strings.Replace(t.sql, "CREATE TABLE ", "CREATE TEMP TABLE ", 1))
			continue
		}
		cols := make([]string, 0, len(t.cols)+1)
		if !strings.Contains(strings.ToUpper(t.sql), "WITHOUT ROWID") {
			cols = append(cols, "rowid AS rowid") // trace.go orders runs by it
		}
		missing := false
		for _, col := range t.cols {
			if slices.Contains(have[i].cols, col) {
				cols = append(cols, quote(col))
				continue
			}
			missing = true
			d, ok := t.defaults[col]
			if !ok {
				d = "NULL"
			}
			cols = append(cols, d+" AS "+quote(col))
		}
		if missing {
			stmts = append(stmts, "CREATE TEMP VIEW "+quote(t.name)+" AS SELECT "+strings.Join(cols, ", ")+" FROM main."+quote(t.name))
		}
	}
	return stmts, nil
}

// newestTables returns the tables of SchemaVersion, as the migrations
// make them in an empty in-memory database.
func (c *readers) newestTables(ctx context.Context) ([]table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.newest != nil {
		return c.newest, nil
	}
	var b [12]byte
	rand.Read(b[:])
	q := url.Values{}
	q.Set("vfs", "memdb")
	// A driver of its own: c.drv's hook makes its connections query_only.
	conn, err := (&sqlite.Driver{}).Open("file:/io-harness-schema-" + hex.EncodeToString(b[:]) + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	eq := conn.(sqlite.ExecQuerierContext)
	for _, m := range migrations() {
		if _, err := eq.ExecContext(ctx, m, nil); err != nil {
			return nil, fmt.Errorf("the newest schema: %w", err)
		}
	}
	if c.newest, err = tables(ctx, eq, "main"); err != nil {
		return nil, err
	}
	return c.newest, nil
}

// tables lists the tables of a schema of conn.
func tables(ctx context.Context, conn sqlite.ExecQuerierContext, schema string) ([]table, error) {
	rows, err := query(ctx, conn, "SELECT name, sql FROM "+schema+".sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
	if err != nil {
		return nil, err
	}
	var out []table
	for _, r := range rows {
		t := table{name: r[0].(string), sql: r[1].(string), defaults: map[string]string{}}
		cols, err := query(ctx, conn, "SELECT name, dflt_value FROM pragma_table_info("+literal(t.name)+", "+literal(schema)+")")
		if err != nil {
			return nil, err
		}
		for _, col := range cols {
			name := col[0].(string)
			t.cols = append(t.cols, name)
			if d, ok := col[1].(string); ok {
				t.defaults[name] = d
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// query runs q on a driver connection and returns every row.
func query(ctx context.Context, conn sqlite.ExecQuerierContext, q string) ([][]driver.Value, error) {
	rows, err := conn.QueryContext(ctx, q, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]driver.Value
	for {
		row := make([]driver.Value, len(rows.Columns()))
		err := rows.Next(row)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
}

// quote quotes an identifier; literal a string.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
func literal(s string) string  { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
