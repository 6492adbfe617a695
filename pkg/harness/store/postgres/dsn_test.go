package postgres

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"postgres://ioh:hunter22@db.example:5432/runs", "postgres://ioh@db.example:5432/runs"},
		{"postgresql://ioh:p%40ss%2Fword@db/runs?sslmode=require", "postgresql://ioh@db/runs?sslmode=require"},
		{"postgres://ioh@db/runs?password=hunter22&search_path=fleet", "postgres://ioh@db/runs?search_path=fleet"},
		{"postgres://ioh@db/runs?sslpassword=keypass&sslmode=verify-full", "postgres://ioh@db/runs?sslmode=verify-full"},
		{"postgres://db/runs", "postgres://db/runs"},
		{"postgres://ioh:hunter22@db/runs#frag-hunter22", "postgres://ioh@db/runs"},
		{"postgres://ioh:hunter22@%zz/runs", "postgres://[unparsable DSN]"},
	} {
		if got := Redact(c.dsn); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.dsn, got, c.want)
		}
	}
}

// The standard library's redaction, the obvious tool, keeps a password
// given as a parameter; Redact does not.
func TestRedactBeatsURLRedacted(t *testing.T) {
	const dsn = "postgres://ioh:first-secret@db/runs?password=second-secret"
	u, _ := url.Parse(dsn)
	if !strings.Contains(u.Redacted(), "second-secret") {
		t.Fatalf("the negative control no longer leaks: %s", u.Redacted())
	}
	for _, s := range []string{"first-secret", "second-secret"} {
		if strings.Contains(Redact(dsn), s) {
			t.Errorf("Redact kept %s: %s", s, Redact(dsn))
		}
	}
}

func TestSecrets(t *testing.T) {
	got := secrets("postgres://ioh:p%40ss%2Fw@db/runs?password=a+b%21&sslmode=disable")
	for _, want := range []string{"p%40ss%2Fw", "p@ss/w", "a+b%21", "a+b!", "a b!"} {
		if !slices.Contains(got, want) {
			t.Errorf("secrets lacks %q: %q", want, got)
		}
	}
	for _, safe := range []string{"ioh", "db", "runs", "disable"} {
		if slices.Contains(got, safe) {
			t.Errorf("secrets holds %q, which is not one", safe)
		}
	}
}

// Every way a DSN can fail to open names the store without its password:
// a malformed DSN, a server that is not there, a wrong password, a
// database that does not exist.
func TestOpenErrorsHoldNoPassword(t *testing.T) {
	ctx := context.Background()
	admin := pg.Admin(t)
	u, _ := url.Parse(admin)
	host := u.Host
	const pw = "Zq9-correct-horse-battery"
	for _, c := range []struct {
		name, dsn string
		want      error
	}{
		{"malformed", "postgres://ioh:" + pw + "@127.0.0.1:notaport/postgres", store.ErrUnavailable},
		{"bad percent", "postgres://ioh:" + pw + "%zz@127.0.0.1/postgres", store.ErrUnavailable},
		{"no server", "postgres://ioh:" + pw + "@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5", store.ErrUnavailable},
		{"wrong password", "postgres://ioh:" + pw + "@" + host + "/postgres?sslmode=disable", store.ErrUnavailable},
		{"password parameter", "postgres://ioh@" + host + "/postgres?sslmode=disable&password=" + pw, store.ErrUnavailable},
		{"no database", "postgres://ioh:" + pg.Password() + "@" + host + "/nope_" + "db?sslmode=disable", store.ErrUnavailable},
		{"bad sslmode", "postgres://ioh:" + pw + "@" + host + "/postgres?sslmode=" + pw, store.ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(ctx, c.dsn)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			t.Logf("%v", err)
			if !errors.Is(err, c.want) {
				t.Errorf("error %v, want %v", err, c.want)
			}
			for _, secret := range []string{pw, pg.Password()} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error holds the password: %v", err)
				}
			}
		})
	}
}
