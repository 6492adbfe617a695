package sqlite

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// Report is what [Store.Check] found.
type Report struct {
	// Path is the store's database file.
	Path string `json:"path"`
	// Files are the store's files with their sizes in bytes: the
	// database, its write-ahead log and its shared-memory index. A copy of
	// the store must take all three.
	Files map[string]int64 `json:"files"`
	// Schema is the file's schema version.
	Schema int `json:"schema"`
	// Integrity is SQLite's integrity check: "ok", or the problems found.
	Integrity []string `json:"integrity"`
	// Runs counts the runs by status; Leased the runs a driver holds now.
	Runs   map[string]int `json:"runs"`
	Leased int            `json:"leased"`
}

// OK reports whether the integrity check found nothing wrong.
func (r *Report) OK() bool { return len(r.Integrity) == 1 && r.Integrity[0] == "ok" }

// Check runs SQLite's integrity check over the whole file and summarises
// what the store holds. It only reads.
func (s *Store) Check(ctx context.Context) (*Report, error) {
	r := &Report{Path: s.path, Files: map[string]int64{}, Runs: map[string]int{}}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(s.path + suffix); err == nil {
			r.Files[s.path+suffix] = fi.Size()
		}
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&r.Schema); err != nil {
		return nil, s.classify("read schema version", err)
	}
	rows, err := s.db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return nil, s.classify("integrity check", err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return nil, s.classify("integrity check", err)
		}
		r.Integrity = append(r.Integrity, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.classify("integrity check", err)
	}
	srows, err := s.db.QueryContext(ctx, "SELECT status, count(*) FROM runs GROUP BY status")
	if err != nil {
		return nil, s.classify("count runs", err)
	}
	defer srows.Close()
	for srows.Next() {
		var status string
		var n int
		if err := srows.Scan(&status, &n); err != nil {
			return nil, s.classify("count runs", err)
		}
		r.Runs[status] = n
	}
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM leases WHERE expires > CAST(strftime('%s','now') AS INTEGER)*1000").Scan(&r.Leased); err != nil {
		return nil, s.classify("count leases", err)
	}
	return r, srows.Err()
}

// String is the report as a person reads it.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store %s (schema %d)\n", r.Path, r.Schema)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if n, ok := r.Files[r.Path+suffix]; ok {
			fmt.Fprintf(&b, "  %s  %d bytes\n", r.Path+suffix, n)
		}
	}
	fmt.Fprintf(&b, "integrity: %s\n", strings.Join(r.Integrity, "; "))
	fmt.Fprintf(&b, "runs: %d running, %d paused, %d finished; %d driven now\n",
		r.Runs["running"], r.Runs["paused"], r.Runs["finished"], r.Leased)
	return b.String()
}
