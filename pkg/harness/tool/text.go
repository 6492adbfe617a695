package tool

import (
	"bytes"
	"unicode/utf8"
)

// binarySniff is how much of a file's head is searched for a NUL byte to
// decide it is binary.
const binarySniff = 8 << 10

// hasNUL reports whether the head of data holds a NUL byte, the mark of a
// binary file that grep skips.
func hasNUL(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0
}

// isBinary reports whether data is not text: a NUL byte in its head, or
// invalid UTF-8 anywhere.
func isBinary(data []byte) bool {
	return hasNUL(data) || !utf8.Valid(data)
}

// trimPartialRune drops an incomplete UTF-8 sequence from the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
