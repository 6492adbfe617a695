// Package toolid maps tool-call ids to the ids a vendor accepts.
//
// A run that falls back from one vendor to another sends the second the
// first one's history, tool-call ids included, and vendors disagree on
// what an id may be: Kimi's "functions.read_file:0" is refused by
// Anthropic, whose ids must match ^[a-zA-Z0-9_-]+$, and OpenAI refuses ids
// longer than 40 bytes. A vendor package maps every id of a request (a
// call's id and the id a result answers) through its vendor's [Rule].
package toolid

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// Rule is what a vendor accepts as a tool-call id. The zero Rule accepts
// every id.
type Rule struct {
	// MaxLen is the longest id accepted, in bytes; 0 means no limit. A
	// limit must be at least MinMaxLen.
	MaxLen int
	// Safe restricts ids to ASCII letters, digits, '_' and '-'.
	Safe bool
}

// MinMaxLen is the shortest limit a Rule may set: the length of the
// suffix a mapped id ends with, and a few bytes of the original id.
const MinMaxLen = len(marker) + hashLen + 4

// Anthropic is Anthropic's rule: ids must match ^[a-zA-Z0-9_-]+$; 64
// bytes is a length the other vendors' limits stay under.
func Anthropic() Rule { return Rule{MaxLen: 64, Safe: true} }

// OpenAI is OpenAI's rule: an id longer than 40 bytes is refused
// ("string too long. Expected a string with maximum length 40"); its own
// ids are "call_" and 24 letters and digits. The alphabet is Anthropic's,
// which every vendor accepts.
func OpenAI() Rule { return Rule{MaxLen: 40, Safe: true} }

// OpenRouter is OpenRouter's rule. It passes ids on to whichever vendor
// serves the model, so it gets the strictest of them: OpenAI's length and
// Anthropic's alphabet.
func OpenRouter() Rule { return Rule{MaxLen: 40, Safe: true} }

// marker and the hash after it end every mapped id, and no id kept as it
// is: that is what keeps a mapped id from ever equalling a kept one.
const (
	marker  = "-h"
	hashLen = 16 // base32 characters: 80 bits of SHA-256
)

// Map returns the id to send for id under r.
//
// An id r accepts is sent as it is, unless it ends like a mapped id; any
// other id is replaced by its accepted characters (others become '_'),
// cut to leave room, followed by "-h" and 16 characters of its SHA-256.
// Map is a pure function, so a resumed run sends the ids the first run
// sent, and it is injective short of a SHA-256 collision: a kept id never
// ends like a mapped one, and a mapped one carries a hash of the whole
// original id.
func (r Rule) Map(id string) string {
	if r.accepts(id) && !mapped(id) {
		return id
	}
	if r == (Rule{}) {
		return id
	}
	prefix := id
	if r.Safe {
		prefix = strings.Map(func(c rune) rune {
			if safe(c) {
				return c
			}
			return '_'
		}, id)
	}
	if r.MaxLen > 0 {
		room := max(r.MaxLen-len(marker)-hashLen, 0)
		if len(prefix) > room {
			prefix = prefix[:room]
		}
		if !r.Safe { // a cut must not leave half a character
			prefix = strings.ToValidUTF8(prefix, "")
		}
	}
	sum := sha256.Sum256([]byte(id))
	h := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
	return prefix + marker + h[:hashLen]
}

// accepts reports whether r takes id as it is.
func (r Rule) accepts(id string) bool {
	if id == "" && r != (Rule{}) || r.MaxLen > 0 && len(id) > r.MaxLen {
		return false
	}
	if r.Safe {
		for i := 0; i < len(id); i++ {
			if !safe(rune(id[i])) {
				return false
			}
		}
	}
	return true
}

// mapped reports whether id ends like a mapped id.
func mapped(id string) bool {
	n := len(id) - hashLen - len(marker)
	if n < 0 || id[n:n+len(marker)] != marker {
		return false
	}
	for _, c := range id[n+len(marker):] {
		if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

func safe(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
