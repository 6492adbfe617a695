package policy

import (
	"errors"
	"net"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// target is a string to match, in the forms its act is matched in.
type target struct {
	path bool   // a workspace path: a leading "/" in a pattern anchors it at the root
	full string // the whole target: a slash path, a program, host:port
	last string // its last path segment, or the host without its port
}

func newTarget(act Act, s string) target {
	switch act {
	case Net:
		s = strings.ToLower(strings.TrimSpace(s))
		t := target{full: s, last: s}
		if h, _, err := net.SplitHostPort(s); err == nil {
			t.last = h
		}
		return t
	case Read, Write:
		s = strings.ReplaceAll(s, `\`, "/")
		for strings.HasPrefix(s, "./") {
			s = s[2:]
		}
	}
	t := target{path: act == Read || act == Write, full: s, last: s}
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		t.last = s[i+1:]
	}
	return t
}

// matches reports whether pattern matches the target: its whole form, or,
// for a pattern without a "/", its last segment (or bare host). A path
// pattern that starts with "/" is anchored at the workspace root and
// matches the whole path only.
func (t target) matches(pattern string) bool {
	if t.path && strings.HasPrefix(pattern, "/") {
		return match(pattern[1:], t.full)
	}
	if match(pattern, t.full) {
		return true
	}
	return t.last != t.full && !strings.Contains(pattern, "/") && match(pattern, t.last)
}

// Literal returns a pattern that matches exactly target for act: its glob
// characters escaped and, for a path, anchored at the workspace root.
func Literal(act Act, target string) string {
	var b strings.Builder
	if act == Read || act == Write {
		b.WriteByte('/')
		target = strings.TrimPrefix(strings.ReplaceAll(target, `\`, "/"), "/")
	}
	if act == Net {
		target = strings.ToLower(target)
	}
	for _, r := range target {
		if strings.ContainsRune("*?[]{}\\", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// match is doublestar.Match with fast paths for the shapes most rules
// take: a literal, "*suffix" and "prefix*". Patterns are validated before
// they are used, so a match error cannot occur.
func match(pattern, s string) bool {
	const meta = "*?[{\\"
	switch i := strings.IndexAny(pattern, meta); {
	case i < 0:
		return pattern == s
	case i == 0 && pattern[0] == '*' && !strings.ContainsAny(pattern[1:], meta):
		rest := s[:max(0, len(s)-len(pattern)+1)]
		return strings.HasSuffix(s, pattern[1:]) && !strings.Contains(rest, "/")
	case i == len(pattern)-1 && pattern[i] == '*':
		return strings.HasPrefix(s, pattern[:i]) && !strings.Contains(s[i:], "/")
	}
	ok, _ := doublestar.Match(pattern, s)
	return ok
}

// validPattern reports what is wrong with a pattern for act, if anything.
func validPattern(act Act, pattern string) error {
	switch {
	case pattern == "":
		return errors.New("empty pattern")
	case strings.ContainsRune(pattern, 0):
		return errors.New("pattern contains a NUL byte")
	case !doublestar.ValidatePattern(pattern):
		return errors.New("malformed glob " + quote(pattern))
	case act == Net && strings.Contains(pattern, "/"):
		return errors.New("a net pattern is a host or host:port, not a URL or path: " + quote(pattern))
	case (act == Read || act == Write) && (strings.HasPrefix(pattern, "../") || strings.HasPrefix(pattern, "//")):
		return errors.New("a path pattern is relative to the workspace root (a leading / anchors it there): " + quote(pattern))
	}
	return nil
}

func quote(s string) string { return `"` + s + `"` }
