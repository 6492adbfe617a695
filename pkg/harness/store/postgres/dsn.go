package postgres

import (
	"net/url"
	"strings"
)

// IsDSN reports whether where names a PostgreSQL database: a URL whose
// scheme is postgres or postgresql.
func IsDSN(where string) bool {
	lower := strings.ToLower(where)
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://")
}

// secretParams are the query parameters of a DSN that hold a credential.
var secretParams = []string{"password", "sslpassword"}

// Redact returns dsn without its credentials: the password of the user
// info and every password parameter are removed, so the result can be
// printed, logged and stored. A DSN that does not parse is replaced as a
// whole: nothing of it can be known to be safe.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Opaque != "" {
		return "postgres://[unparsable DSN]"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	if u.RawQuery != "" {
		q := u.Query()
		for _, k := range secretParams {
			q.Del(k)
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// secrets returns the credentials dsn carries, in every spelling an error
// message could hold them in: as written, unescaped, and escaped for a
// path or a query.
func secrets(dsn string) []string {
	var raw []string
	if i := strings.Index(dsn, "://"); i >= 0 {
		rest := dsn[i+3:]
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				raw = append(raw, pw)
			}
		}
	}
	if _, query, ok := strings.Cut(dsn, "?"); ok {
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			for _, s := range secretParams {
				if strings.EqualFold(k, s) {
					raw = append(raw, v)
				}
			}
		}
	}
	var out []string
	add := func(s string) {
		if s != "" && !contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range raw {
		decoded := []string{s}
		if u, err := url.PathUnescape(s); err == nil {
			decoded = append(decoded, u)
		}
		if u, err := url.QueryUnescape(s); err == nil {
			decoded = append(decoded, u)
		}
		for _, d := range decoded {
			add(d)
			add(url.PathEscape(d))
			add(url.QueryEscape(d))
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scrub replaces every credential of the store's DSN in msg.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "[redacted]")
	}
	return msg
}
