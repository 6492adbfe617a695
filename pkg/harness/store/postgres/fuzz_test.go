package postgres

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// Whatever a password holds, the redacted DSN does not, in any spelling.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"hunter22", "p@ss/w:rd", "a%zz", "ümlaut pw", "x?y=z&q", "##", "@@@"} {
		f.Add(s, "db.example:5432", "runs")
	}
	f.Fuzz(func(t *testing.T, pw, host, db string) {
		if len(pw) < 4 || strings.ContainsAny(host+db, "@/?#%") {
			return
		}
		u := &url.URL{Scheme: "postgres", User: url.UserPassword("ioh", pw), Host: host, Path: "/" + db}
		// What the DSN holds besides the password, in every spelling: a
		// password that is part of it cannot be told from it.
		rest := (&url.URL{Scheme: "postgres", User: url.User("ioh"), Host: host, Path: "/" + db}).String() + " " + db + " " + url.QueryEscape(db)
		for _, dsn := range []string{u.String(), "postgres://ioh@" + host + "/" + db + "?password=" + url.QueryEscape(pw)} {
			got := Redact(dsn)
			for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
				if len(form) >= 4 && strings.Contains(got, form) && !strings.Contains(rest, form) {
					t.Fatalf("Redact(%q) = %q holds the password", dsn, got)
				}
			}
			if msg := scrub("failed: "+dsn+" "+pw, secrets(dsn)); strings.Contains(msg, pw) {
				t.Fatalf("scrub left the password in %q", msg)
			}
		}
	})
}

// Every string reads back as it was, and what is stored is text
// PostgreSQL takes: UTF-8 without a NUL.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "plain", "nul\x00", "\xff\xfe", escaped, escaped + "aGk=", "✓"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		stored := text(s)
		if !utf8.ValidString(stored) || strings.IndexByte(stored, 0) >= 0 {
			t.Fatalf("text(%q) = %q is not storable", s, stored)
		}
		if back := untext(stored); back != s {
			t.Fatalf("untext(text(%q)) = %q", s, back)
		}
	})
}
