package git

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxRefName bounds a branch name or a revision, in bytes.
const maxRefName = 255

// checkBranch checks a branch name by git's check-ref-format rules for
// refs/heads/<name>, and by ours: it does not start with "-" (so it can
// never be read as an option), is not HEAD, and is at most maxRefName
// bytes of UTF-8. The error says which rule it breaks.
func checkBranch(name string) error {
	if strings.HasPrefix(name, "-") {
		return fmt.Errorf("a branch name may not start with -")
	}
	if name == "HEAD" {
		return fmt.Errorf("HEAD is not a branch name")
	}
	return checkRefName(name)
}

// checkRefName applies check-ref-format's rules to name.
func checkRefName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the name is empty")
	case len(name) > maxRefName:
		return fmt.Errorf("the name is over %d bytes", maxRefName)
	case !utf8.ValidString(name):
		return fmt.Errorf("the name is not UTF-8")
	case name == "@":
		return fmt.Errorf("@ alone is not a name")
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return fmt.Errorf("the name starts or ends with /")
	case strings.HasSuffix(name, "."):
		return fmt.Errorf("the name ends with .")
	case strings.Contains(name, ".."):
		return fmt.Errorf("the name contains ..")
	case strings.Contains(name, "//"):
		return fmt.Errorf("the name contains //")
	case strings.Contains(name, "@{"):
		return fmt.Errorf("the name contains @{")
	}
	for _, c := range name {
		switch {
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("the name contains a control character")
		case strings.ContainsRune(" ~^:?*[\\", c):
			return fmt.Errorf("the name contains %q", c)
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if strings.HasPrefix(comp, ".") {
			return fmt.Errorf("a part of the name starts with .")
		}
		if strings.HasSuffix(comp, ".lock") {
			return fmt.Errorf("a part of the name ends with .lock")
		}
	}
	return nil
}

// checkRev checks a revision the model names: HEAD, a branch or tag name
// (by check-ref-format's rules), or an abbreviated or full object name,
// followed by any number of ~N and ^N steps to ancestors. Nothing else is
// accepted: no ranges, no reflog (@{...}), no :path, no option. The git
// tools also put every revision after --end-of-options.
func checkRev(rev string) error {
	base := rev
	if i := strings.IndexAny(rev, "~^"); i >= 0 {
		base = rev[:i]
		for rest := rev[i:]; rest != ""; {
			rest = rest[1:]
			for rest != "" && '0' <= rest[0] && rest[0] <= '9' {
				rest = rest[1:]
			}
			if rest != "" && rest[0] != '~' && rest[0] != '^' {
				return fmt.Errorf("%q: after ~ or ^ only a number or another ~ or ^ may follow", rev)
			}
		}
	}
	if strings.HasPrefix(base, "-") {
		return fmt.Errorf("%q: a revision may not start with -", rev)
	}
	if base == "HEAD" || isHex(base) && len(base) >= 4 {
		return nil
	}
	if err := checkRefName(base); err != nil {
		return fmt.Errorf("%q is not a revision: %v", rev, err)
	}
	return nil
}

func isHex(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
