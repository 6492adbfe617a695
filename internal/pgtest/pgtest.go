// Package pgtest starts a real, throwaway PostgreSQL server for tests: the
// distribution's own initdb and postgres, a cluster in a temporary
// directory, a random superuser password, a loopback port. One server
// serves one test binary; each test gets a schema of its own.
//
// When the tests run as root the cluster is made and run as the
// unprivileged user nobody (PostgreSQL refuses to run as root), through
// the process credentials of os/exec, with a parent-death signal so that a
// killed test binary leaves no server behind.
//
// A test binary uses it from TestMain:
//
//	var pg = &pgtest.Server{}
//
//	func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }
//
// and a test asks for a database with pg.DSN(t), which skips the test,
// saying why, when PostgreSQL is not installed.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// nobody is the unprivileged user a root test runs the server as.
const nobody = 65534

// Server is one PostgreSQL server for the tests of one binary, started on
// first use. Its zero value is ready to use.
type Server struct {
	once    sync.Once
	err     error // why there is no server; set once
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	admin   string // the superuser's DSN, password included
	pw      string
	schemas int
	mu      sync.Mutex
}

// Main runs the tests and stops the server, if one was started, and
// returns the exit code.
func (s *Server) Main(m *testing.M) int {
	code := m.Run()
	s.Stop()
	return code
}

// DSN returns the URL of a fresh, empty schema on the server, with the
// superuser's password in it: the search_path parameter selects the
// schema. It skips the test when the server cannot be started, saying why.
func (s *Server) DSN(t testing.TB) string {
	t.Helper()
	if err := s.start(); err != nil {
		t.Skipf("no PostgreSQL for this test: %v", err)
	}
	s.mu.Lock()
	s.schemas++
	name := fmt.Sprintf("t%d_%s", s.schemas, strings.ToLower(randHex(4)))
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	return withParam(s.admin, "search_path", name)
}

// Admin returns the superuser's DSN of the server's default database, or
// skips the test.
func (s *Server) Admin(t testing.TB) string {
	t.Helper()
	if err := s.start(); err != nil {
		t.Skipf("no PostgreSQL for this test: %v", err)
	}
	return s.admin
}

// Password is the superuser's password, which tests search for where it
// must never appear.
func (s *Server) Password() string { return s.pw }

// Exec runs one statement as the superuser.
func (s *Server) Exec(ctx context.Context, sql string) error {
	if err := s.start(); err != nil {
		return err
	}
	return s.exec(ctx, sql)
}

func (s *Server) exec(ctx context.Context, sql string) error {
	c, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	_, err = c.Exec(ctx, sql)
	return err
}

// withParam adds a query parameter to a URL.
func withParam(dsn, key, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) start() error {
	s.once.Do(func() { s.err = s.boot() })
	return s.err
}
