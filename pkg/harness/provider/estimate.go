package provider

import (
	"math"
	"unicode/utf8"
)

// TokenCounter is implemented by providers that can count a request's input
// tokens exactly, or estimate them better than [EstimateInput].
type TokenCounter interface {
	CountInput(req *Request) int64
}

// PerMessageTokens is what [EstimateInput] counts for each message and
// tool beyond its text: the framing a chat template wraps it in.
const PerMessageTokens = 4

// EstimateInput estimates the input tokens of req: [CountTextTokens] of
// every text in it, plus [PerMessageTokens] for each message and tool. It
// is used to enforce a token budget before a request is sent when the
// provider is not a [TokenCounter], so it errs towards counting more: see
// CountTextTokens for the bound.
func EstimateInput(req *Request) int64 {
	n := CountTextTokens(req.System)
	msgs := int64(len(req.Messages) + len(req.Tools))
	for i := range req.Messages {
		n += MessageTokens(&req.Messages[i])
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		n += CountTextTokens(t.Name) + CountTextTokens(t.Description) + CountTextTokens(string(t.Parameters))
	}
	return n + msgs*PerMessageTokens
}

// ImageTokens is what [EstimateInput] counts for each image: more than any
// vendor charges for the largest image it takes (Anthropic about 1,600,
// OpenAI's patch-billed models up to about 3,800).
const ImageTokens = 4096

// MessageTokens is [CountTextTokens] of every text of m (its content, its
// tool call id, and each call's id, name and arguments) and [ImageTokens]
// for each of its images. The framing ([PerMessageTokens]) is not
// included.
func MessageTokens(m *Message) int64 {
	n := CountTextTokens(m.Content) + CountTextTokens(m.ToolCallID) + int64(len(m.Images))*ImageTokens
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		n += CountTextTokens(c.ID) + CountTextTokens(c.Name) + CountTextTokens(string(c.Arguments))
	}
	return n
}

// CountTextTokens counts the tokens of s conservatively: never fewer
// than cl100k_base (GPT-4) and o200k_base (GPT-5, GPT-4o) make of s as a
// request carries it (each invalid UTF-8 byte sent as U+FFFD), and never
// more than three a byte.
//
// The bound follows from how those tokenizers work, not from a fit to a
// corpus. A token is at least one byte, and never spans two of the
// pieces the tokenizers first split text into (a word with the one space
// or mark before it, up to three digits, a run of punctuation, a run of
// white space). Byte-pair encoding stops only when no two neighbouring
// tokens of a piece join into a token of the vocabulary. So a
// non-ASCII character costs its bytes, an invalid byte three (U+FFFD is
// three bytes), and every other byte a token of its own, except:
//   - a run of ASCII digits costs a token for each three, since every
//     string of one to three digits is a token of both (one more for each
//     end that touches a non-ASCII character, which may be a digit);
//   - a run of ASCII letters, with the space before it, costs the most
//     tokens it can be split into such that no two neighbouring
//     one-letter tokens form a token: at most two for every three letters
//     (letterPair lists the pairs that are tokens in both vocabularies).
//
// The harness's own fixed texts (the built-in tools' names, descriptions
// and schemas) are not estimated: their counts by both tokenizers are
// checked in (known_tokens.go), matched by length and SHA-256.
//
// The price is over-counting ordinary text about three times (the test
// logs its figures on this module's sources and on prose), since a word
// the vocabulary holds whole costs one token but is counted as if it
// could split. The tests check the vocabulary facts the bound rests on,
// and the bound itself on adversarial text. Anthropic's and Google's
// tokenizers are not public; where a vendor's count matters exactly, its
// provider implements [TokenCounter].
func CountTextTokens(s string) int64 {
	if t, ok := knownTokens(s); ok {
		return t
	}
	var n int64
	for i := 0; i < len(s); {
		b := s[i]
		switch {
		case b >= utf8.RuneSelf:
			r, w := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && w == 1 {
				n += badByteTokens
			} else {
				n += int64(w)
			}
			i += w
		case letterIndex(b) >= 0 || b == ' ' && i+1 < len(s) && letterIndex(s[i+1]) >= 0:
			j := i + 1
			for j < len(s) && letterIndex(s[j]) >= 0 {
				j++
			}
			n += wordTokens(s[i:j])
			i = j
		case b >= '0' && b <= '9':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			d := int64(j-i+2) / 3
			if i > 0 && s[i-1] >= utf8.RuneSelf {
				d++
			}
			if j < len(s) && s[j] >= utf8.RuneSelf {
				d++
			}
			n += min(d, int64(j-i))
			i = j
		default: // punctuation, white space, a control character
			n++
			i++
		}
	}
	return n
}

// badByteTokens is what an invalid UTF-8 byte costs: the bytes of U+FFFD,
// which a request carries in its place.
const badByteTokens = 3

// wordTokens is the most tokens w, ASCII letters after an optional space,
// can be split into when no two neighbouring one-byte tokens form a
// token. Every piece of it is a token on its own, and a token of two
// bytes or more may be anything.
func wordTokens(w string) int64 {
	// one and more are the most tokens of w[:k+1] whose last token is one
	// byte, or longer; before is the most of w[:k].
	one, more, before := int64(1), int64(math.MinInt32), int64(0)
	for k := 1; k < len(w); k++ {
		most := max(one, more)
		next := 1 + more
		if !letterPair(w[k-1], w[k]) {
			next = 1 + most
		}
		one, more, before = next, 1+before, most
	}
	return max(one, more)
}

// letterPair reports whether the two bytes, an ASCII letter or a space
// followed by an ASCII letter, are one token in both vocabularies.
func letterPair(a, b byte) bool {
	if a == ' ' {
		return true
	}
	return pairTokens[letterIndex(a)]>>letterIndex(b)&1 != 0
}

// letterIndex is 0 to 25 for A to Z, 26 to 51 for a to z, and -1 for
// any other byte.
func letterIndex(b byte) int {
	switch {
	case b >= 'A' && b <= 'Z':
		return int(b - 'A')
	case b >= 'a' && b <= 'z':
		return int(b-'a') + 26
	}
	return -1
}

// pairTokens[letterIndex(a)] has bit letterIndex(b) set when the two
// letters ab are a single token of both cl100k_base and o200k_base.
// TestVocabularyFacts checks it against the tokenizers.
var pairTokens = [52]uint64{
	0xffbffbbffffff, // A
	0x4592545feffff, // B
	0x659267dfefdff, // C
	0x79044dfeffff,  // D
	0x6fef0bafffdff, // E
	0x259a475defdff, // F
	0x59244dfef9ff,  // G
	0xc430447fffdff, // H
	0x23bf0a2ffffff, // I
	0x5100442ed71f,  // J
	0x40886456efdff, // K
	0x4e184c53efd7f, // L
	0x47b047dffffff, // M
	0x659476ffeffff, // N
	0x3af6a8fefdff,  // O
	0x6793745feffff, // P
	0x6004001fb817,  // Q
	0x2530245fefdff, // R
	0xd6ff657ffffff, // S
	0x7db1667fefdff, // T
	0x3ae609bebd7f,  // U
	0x45154442efd7f, // V
	0x4190644cefdff, // W
	0x4218e993f,     // X
	0x4100474cf855,  // Y
	0x243c260b1,     // Z
	0xffffffc000000, // a
	0xffbfffc000000, // b
	0xffffffc000000, // c
	0xffffffc000000, // d
	0xffffffc000000, // e
	0x7fff7fc000000, // f
	0xffbe7fc000000, // g
	0xffff7fc000000, // h
	0xffffffc000000, // i
	0x7ffefc000000,  // j
	0x5fbfffc000000, // k
	0xffbfffc000000, // l
	0x7fffffc000000, // m
	0xffbfffc000000, // n
	0xffbfffc000000, // o
	0xffffffc000000, // p
	0x37ee67c000000, // q
	0xffff7fc000000, // r
	0xffffffc000000, // s
	0xffbf7fc000000, // t
	0xffbfffc000000, // u
	0x7fbfffc000000, // v
	0x77bfffc000000, // w
	0xe3be4fc000000, // x
	0xf7bf77c000000, // y
	0xf73f6fc000000, // z
}
