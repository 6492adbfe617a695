//go:build unix

package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

var pg = &Server{}

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// The server answers with the password it was given, a root test runs it
// as nobody, and each DSN is a fresh schema of its own.
func TestServer(t *testing.T) {
	ctx := context.Background()
	a, b := pg.DSN(t), pg.DSN(t)
	if a == b || !strings.Contains(a, pg.Password()) {
		t.Fatalf("DSNs %q %q", a, b)
	}
	c, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var schema string
	var tables int
	if err := c.QueryRow(ctx, "SELECT current_schema(), (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())").Scan(&schema, &tables); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a, "search_path="+schema) || tables != 0 {
		t.Errorf("DSN %s: schema %q with %d tables", a, schema, tables)
	}
	st, err := os.Stat(filepath.Join(pg.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; os.Geteuid() == 0 && uid != nobody {
		t.Errorf("a root test made the cluster as uid %d, not nobody", uid)
	}
	// A wrong password is refused: the server really checks it.
	if c2, err := pgx.Connect(ctx, strings.Replace(a, pg.Password(), "wrong", 1)); err == nil {
		c2.Close(ctx)
		t.Error("a wrong password was accepted")
	}
}
