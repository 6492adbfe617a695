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
// characters escaped and, for a path, anchored at the workspace root. An
// exec target is a command line; its program is escaped as a glob and its
// arguments as a wildcard.
func Literal(act Act, target string) string {
	if act == Exec {
		words, ok := splitWords(target)
		if !ok || len(words) == 0 {
			words = []string{target}
		}
		// With no arguments the pattern ends in a space: an empty
		// arguments part, which matches no arguments only.
		return escapeGlob(words[0], "*?[]{}\\") + " " + escapeGlob(strings.Join(words[1:], " "), "*?\\")
	}
	var b strings.Builder
	if act == Read || act == Write {
		b.WriteByte('/')
		target = strings.TrimPrefix(strings.ReplaceAll(target, `\`, "/"), "/")
	}
	if act == Net {
		target = strings.ToLower(target)
	}
	b.WriteString(escapeGlob(target, "*?[]{}\\"))
	return b.String()
}

// escapeGlob puts a backslash before every character of s in meta.
func escapeGlob(s, meta string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(meta, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// splitCommand splits an exec pattern into its program part and its
// arguments part, which is absent (hasArgs false) for a bare program.
func splitCommand(pattern string) (prog, args string, hasArgs bool) {
	prog, args, hasArgs = strings.Cut(pattern, " ")
	return prog, strings.TrimLeft(args, " "), hasArgs
}

// matchesInvocation reports whether an exec rule matches one program a
// command starts.
func (r Rule) matchesInvocation(inv invocation) bool {
	if inv.opaque {
		// It could be anything: every deny and ask rule, no allow rule.
		return r.Effect != Allow
	}
	prog, args, hasArgs := splitCommand(r.Pattern)
	if !r.matchesProgram(prog, inv) {
		return false
	}
	if !hasArgs {
		return true
	}
	joined := strings.Join(inv.args, " ")
	if inv.open {
		// More arguments follow that nobody knows. A deny or ask might
		// match them; an allow does only when it ends in "*" and so
		// matches whatever is appended.
		if r.Effect != Allow {
			return true
		}
		return endsInStar(args) && wildcard(args, joined)
	}
	return wildcard(args, joined)
}

// matchesProgram matches the program part of an exec pattern.
func (r Rule) matchesProgram(prog string, inv invocation) bool {
	if !strings.Contains(prog, "/") {
		if r.Effect == Allow && !inv.system {
			return false
		}
		return match(prog, inv.name)
	}
	prog = strings.TrimPrefix(prog, "./")
	return inv.path != "" && match(prog, inv.path) || inv.file != "" && match(prog, inv.file)
}

// endsInStar reports whether a wildcard ends in an unescaped "*".
func endsInStar(p string) bool {
	if !strings.HasSuffix(p, "*") {
		return false
	}
	n := 0
	for i := len(p) - 2; i >= 0 && p[i] == '\\'; i-- {
		n++
	}
	return n%2 == 0
}

// wildcard matches s against p, in which "*" matches any run of
// characters, "?" any one character, and "\\" makes the next character
// literal.
func wildcard(p, s string) bool {
	star, mark := -1, 0
	i, j := 0, 0
	for j < len(s) {
		switch {
		case i < len(p) && p[i] == '*':
			star, mark = i, j
			i++
			continue
		case i < len(p) && p[i] == '?':
			i++
			j++
			continue
		case i+1 < len(p) && p[i] == '\\' && p[i+1] == s[j]:
			i += 2
			j++
			continue
		case i < len(p) && p[i] != '\\' && p[i] == s[j]:
			i++
			j++
			continue
		}
		if star < 0 {
			return false
		}
		mark++
		i, j = star+1, mark
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
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
	case act == Exec:
		prog, args, _ := splitCommand(pattern)
		switch {
		case prog == "":
			return errors.New("an exec pattern starts with its program: " + quote(pattern))
		case !doublestar.ValidatePattern(prog):
			return errors.New("malformed glob " + quote(prog))
		case (len(args)-len(strings.TrimRight(args, "\\")))%2 == 1:
			return errors.New("an exec pattern's arguments end in a lone backslash: " + quote(pattern))
		}
	case act == Net && strings.Contains(pattern, "/"):
		return errors.New("a net pattern is a host or host:port, not a URL or path: " + quote(pattern))
	case (act == Read || act == Write) && (strings.HasPrefix(pattern, "../") || strings.HasPrefix(pattern, "//")):
		return errors.New("a path pattern is relative to the workspace root (a leading / anchors it there): " + quote(pattern))
	}
	return nil
}

func quote(s string) string { return `"` + s + `"` }
