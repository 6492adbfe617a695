package git

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The repository's own config file is never given to git: a repository
// is untrusted, and its config can name programs (filter and diff
// drivers, fsmonitor, a pager, a gpg program, an ssh command, credential
// helpers) that git would run. The harness reads the file itself and
// carries over only the keys below, each value checked against what the
// key may hold; everything else in the file is ignored, includes too.

// carried returns the check of a key's value when the key is on the
// allow-list: the keys of a repository's config that change how git reads
// the repository and its files, and that can hold nothing but data.
func carried(key string) (func(string) bool, bool) {
	switch key {
	case "core.repositoryformatversion":
		return oneOf("0", "1"), true
	case "extensions.objectformat":
		return oneOf("sha1", "sha256"), true
	case "core.filemode", "core.symlinks", "core.ignorecase", "core.precomposeunicode", "core.trustctime":
		return isBool, true
	case "core.autocrlf":
		return func(v string) bool { return isBool(v) || strings.EqualFold(v, "input") }, true
	case "core.eol":
		return oneOf("lf", "crlf", "native"), true
	case "core.safecrlf":
		return func(v string) bool { return isBool(v) || strings.EqualFold(v, "warn") }, true
	case "core.checkstat":
		return oneOf("default", "minimal"), true
	}
	return nil, false
}

// keyValue is one config setting.
type keyValue struct{ key, value string }

// errConfig is a repository config the harness cannot read.
type errConfig struct {
	line int
	msg  string
}

func (e *errConfig) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// maxConfig bounds the repository config the harness reads.
const maxConfig = 1 << 20

// readConfig parses a git config file and returns the allow-listed
// settings it holds, the last value of a key winning as in git. A file
// git itself would refuse is an error; so is one over maxConfig bytes.
// Keys outside the allow-list are parsed (so that the file is read as git
// reads it) and dropped.
func readConfig(data []byte) ([]keyValue, error) {
	if len(data) > maxConfig {
		return nil, &errConfig{0, fmt.Sprintf("the file is over %d bytes", maxConfig)}
	}
	all, err := parseConfig(string(data))
	if err != nil {
		return nil, err
	}
	last := map[string]string{}
	var order []string
	for _, kv := range all {
		check, ok := carried(kv.key)
		if !ok {
			continue
		}
		if !check(kv.value) {
			return nil, &errConfig{0, fmt.Sprintf("%s has the value %q, which it cannot hold", kv.key, kv.value)}
		}
		if _, seen := last[kv.key]; !seen {
			order = append(order, kv.key)
		}
		last[kv.key] = strings.ToLower(kv.value)
	}
	out := make([]keyValue, 0, len(order))
	for _, k := range order {
		out = append(out, keyValue{k, last[k]})
	}
	return out, nil
}

// parseConfig reads every setting of a git config file, in order, with
// section and key lower-cased (a subsection keeps its case), as git's
// config.c reads them: comments after # or ;, [section], [section
// "subsection"] and the old [section.subsection], "key = value" or a bare
// "key" (true), values with double quotes, the escapes \n \t \b \" \\,
// and a backslash that continues a value on the next line.
func parseConfig(s string) ([]keyValue, error) {
	var out []keyValue
	section := ""
	line := 1
	i := 0
	s = strings.TrimPrefix(s, "\ufeff")
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#' || c == ';':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '[':
			name, n, err := parseSection(s[i:], line)
			if err != nil {
				return nil, err
			}
			section, i = name, i+n
		case isAlpha(c):
			if section == "" {
				return nil, &errConfig{line, "a setting outside any section"}
			}
			j := i
			for j < len(s) && (isAlpha(s[j]) || isDigit(s[j]) || s[j] == '-') {
				j++
			}
			key := strings.ToLower(s[i:j])
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j >= len(s) || s[j] == '\n' || s[j] == '\r' || s[j] == '#' || s[j] == ';' {
				out = append(out, keyValue{section + "." + key, "true"})
				i = j
				continue
			}
			if s[j] != '=' {
				return nil, &errConfig{line, fmt.Sprintf("bad character %q after the name %q", s[j], key)}
			}
			value, n, lines, err := parseValue(s[j+1:], line)
			if err != nil {
				return nil, err
			}
			out = append(out, keyValue{section + "." + key, value})
			i, line = j+1+n, line+lines
		default:
			return nil, &errConfig{line, fmt.Sprintf("unexpected character %q", c)}
		}
	}
	return out, nil
}

// parseSection reads a section header at the start of s and returns the
// section's name ("core", "branch.Main") and the bytes it took.
func parseSection(s string, line int) (string, int, error) {
	i := 1
	j := i
	for j < len(s) && (isAlpha(s[j]) || isDigit(s[j]) || s[j] == '-' || s[j] == '.') {
		j++
	}
	name := strings.ToLower(s[i:j])
	if name == "" {
		return "", 0, &errConfig{line, "a section header without a name"}
	}
	if j < len(s) && s[j] == ']' {
		// [section.subsection], the old form: the subsection is
		// lower-cased with the rest.
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			return "", 0, &errConfig{line, "a section name that starts or ends with a dot"}
		}
		return name, j + 1, nil
	}
	if strings.Contains(name, ".") {
		return "", 0, &errConfig{line, "a dotted section name before a quoted subsection"}
	}
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	if j >= len(s) || s[j] != '"' {
		return "", 0, &errConfig{line, "a section header that does not end with ]"}
	}
	j++
	var sub strings.Builder
	for {
		if j >= len(s) || s[j] == '\n' {
			return "", 0, &errConfig{line, "an unterminated subsection name"}
		}
		c := s[j]
		if c == '"' {
			j++
			break
		}
		if c == '\\' {
			j++
			if j >= len(s) || s[j] == '\n' {
				return "", 0, &errConfig{line, "a backslash at the end of a subsection name"}
			}
			c = s[j]
		}
		if c == 0 {
			return "", 0, &errConfig{line, "a NUL byte in a subsection name"}
		}
		sub.WriteByte(c)
		j++
	}
	if j >= len(s) || s[j] != ']' {
		return "", 0, &errConfig{line, "a subsection name not followed by ]"}
	}
	return name + "." + sub.String(), j + 1, nil
}

// parseValue reads a value after "=" and returns it, the bytes it took
// (up to, not including, the newline that ends it) and the newlines it
// crossed with continuations.
func parseValue(s string, line int) (string, int, int, error) {
	var b strings.Builder
	quoted := false
	pending := 0 // unquoted whitespace not yet known to be inside the value
	lines := 0
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c == '\n' {
			if quoted {
				return "", 0, 0, &errConfig{line + lines, "an unterminated quoted value"}
			}
			break
		}
		if !quoted && (c == ';' || c == '#') {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			break
		}
		if !quoted && (c == ' ' || c == '\t' || c == '\r') {
			if b.Len() > 0 {
				pending++
			}
			continue
		}
		if c == 0 {
			return "", 0, 0, &errConfig{line + lines, "a NUL byte in a value"}
		}
		for ; pending > 0; pending-- {
			b.WriteByte(' ')
		}
		switch c {
		case '"':
			quoted = !quoted
		case '\\':
			i++
			if i >= len(s) {
				return "", 0, 0, &errConfig{line + lines, "a backslash at the end of the file"}
			}
			switch s[i] {
			case '\n':
				lines++
			case '\r':
				if i+1 < len(s) && s[i+1] == '\n' {
					i++
					lines++
					continue
				}
				return "", 0, 0, &errConfig{line + lines, "a bad escape \\r"}
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case '"', '\\':
				b.WriteByte(s[i])
			default:
				return "", 0, 0, &errConfig{line + lines, fmt.Sprintf("a bad escape \\%c", s[i])}
			}
		default:
			b.WriteByte(c)
		}
	}
	if quoted {
		return "", 0, 0, &errConfig{line + lines, "an unterminated quoted value"}
	}
	return b.String(), i, lines, nil
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func oneOf(vals ...string) func(string) bool {
	return func(v string) bool {
		for _, w := range vals {
			if strings.EqualFold(v, w) {
				return true
			}
		}
		return false
	}
}

func isBool(v string) bool {
	switch strings.ToLower(v) {
	case "true", "false", "yes", "no", "on", "off", "":
		return true
	}
	_, err := strconv.Atoi(v)
	return err == nil
}

// shadowConfig is the config file of the shadow repository: the format
// and the extensions, which git reads only from a repository's own file,
// from the carried settings. Every value in it has passed its check, so
// none needs quoting.
func shadowConfig(kvs []keyValue) (string, error) {
	version, format := "0", ""
	for _, kv := range kvs {
		switch kv.key {
		case "core.repositoryformatversion":
			version = kv.value
		case "extensions.objectformat":
			format = kv.value
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[core]\n\trepositoryformatversion = %s\n\tbare = false\n\tlogallrefupdates = true\n", version)
	if format != "" {
		if version != "1" {
			return "", errors.New("extensions.objectformat needs core.repositoryformatversion = 1")
		}
		fmt.Fprintf(&b, "[extensions]\n\tobjectformat = %s\n", format)
	}
	return b.String(), nil
}
