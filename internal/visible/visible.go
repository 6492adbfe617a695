// Package visible renders untrusted text for a terminal: every byte a
// terminal would act on, other than a newline and a tab, is written as an
// escape a person can read, so that text from a model, a tool or a file can
// neither move the cursor, clear the screen, set the window's title nor
// overwrite a line it did not print.
package visible

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Text returns s with each control character written as an escape: the C0
// controls but "\n" and "\t" (ESC as \x1b, BEL as \x07, a carriage return
// as \r), DEL as \x7f, the C1 controls as \u009b and the like, the
// characters that reorder text (bidirectional overrides and isolates) as
// \u202e and the like, and each byte that is not UTF-8 as \xff and the like.
// Everything else, a backslash included, is left as it is: the result is for
// a person to read, not to be parsed back.
func Text(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafe(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unsafe(r, n):
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case unsafe(r, n):
			b.WriteString(`\u`)
			q := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(q)))
			b.WriteString(q)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafe reports whether the rune r, n bytes long, must not reach a
// terminal as it is.
func unsafe(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true // not UTF-8
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f:
		return true // C0 and DEL
	case r >= 0x80 && r <= 0x9f:
		return true // C1: 0x9b is CSI, 0x9d OSC on a terminal that reads them
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidirectional embeddings, overrides and isolates
	}
	return false
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
