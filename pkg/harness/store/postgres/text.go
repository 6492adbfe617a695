package postgres

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// escaped marks a text column's value that holds bytes PostgreSQL's text
// type refuses (a NUL byte, or bytes that are not UTF-8), as base64. The
// marker begins with U+FFFF, a noncharacter no text is meant to hold; a
// value that happens to begin with the marker is escaped too, so every
// string reads back byte for byte.
const escaped = "\uffffb64:"

// text is s as a text column can hold it.
func text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && !strings.HasPrefix(s, escaped) {
		return s
	}
	return escaped + base64.StdEncoding.EncodeToString([]byte(s))
}

// untext reverses text. A value with the marker that is not base64 is
// returned as it is: it was never escaped by this code.
func untext(s string) string {
	rest, ok := strings.CutPrefix(s, escaped)
	if !ok {
		return s
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return s
	}
	return string(b)
}

// textBytes is text for a JSON document or other raw bytes.
func textBytes(b []byte) string { return text(string(b)) }
