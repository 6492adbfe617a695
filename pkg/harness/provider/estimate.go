package provider

import "unicode/utf8"

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
// than a byte-level BPE tokenizer of the vendors makes of it, and never
// more than one a byte.
//
// The bound is measured, not proved: on every text of its test corpus —
// this module's own sources, JSON, logs, CSV, hashes, base64, random
// bytes, prose in eleven languages, random CJK and emoji — and on every
// 512-byte piece of each, the count is at least what both cl100k_base
// (GPT-4) and o200k_base (GPT-4o, GPT-5) make of the text as a request
// carries it (invalid UTF-8 replaced by U+FFFD). The price is
// over-counting: about 1.8 times on source code, 1.6 on JSON, 1.4 on
// logs, 2 on English prose and 1.6 to 3.2 on the other languages, 1.1 to
// 1.3 on random bytes, CJK and emoji (the test logs its figures).
// Anthropic's and Google's tokenizers are not public and were not
// measured; where a vendor's count matters exactly, its provider
// implements [TokenCounter].
//
// The count follows the tokenizers' pre-tokenization in one pass over
// the bytes, without allocating: every run of letters and of digits
// costs at least one token (a token never spans two), a letter past the
// eighth of a run, an upper-case letter after another letter and a
// control character cost a token each, as does any byte within eight
// after a control character (binary data), and a non-ASCII character
// costs 1.5 to 3 tokens by its width (a token never splits fewer than one
// byte). Its predecessor, bytes ÷ 4, under-counted code by about a
// sixth and dense text (hex, base64, CJK) by up to four times.
func CountTextTokens(s string) int64 {
	var units int64 // sixteenths of a token
	prev, run, sinceCtrl := classNL, 0, ctrlReach+1
	for i := 0; i < len(s); {
		b := s[i]
		if b >= utf8.RuneSelf {
			r, w := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && w == 1 {
				units += costBad
			} else {
				units += costRune[w]
			}
			prev, run = classHigh, 0
			i += w
			continue
		}
		c := classOf(b)
		letter := c == classLower || c == classUpper
		sinceCtrl++
		if c == classCtrl {
			sinceCtrl = 0
		}
		if letter {
			run++
		} else {
			run = 0
		}
		switch {
		case c == classCtrl, sinceCtrl <= ctrlReach:
			units += 16
		case letter && (run == 1 || run > 8):
			units += 16
		case c == classUpper:
			units += 16 // after a letter: a hump or a run of capitals
		case c == classLower:
			units += costLowerMore
		case c != prev:
			units += costStart[c]
		default:
			units += costMore[c]
		}
		prev = c
		i++
	}
	return (units + 15) / 16
}

// The classes of bytes CountTextTokens tells apart.
const (
	classLower = iota
	classUpper
	classDigit
	classSpace
	classTab
	classNL
	classCR
	classPunct
	classCtrl
	classHigh // a byte of a non-ASCII character
	numClasses
)

// ctrlReach is how many bytes after a control character cost a token
// each: in binary data nothing merges.
const ctrlReach = 8

// costStart is what, in sixteenths of a token, a byte of each class other
// than letters costs after a byte of another class, and costMore after a
// byte of its own; costLowerMore is a lower-case letter's within the
// first eight of a run. The weights are the least that keep the count
// above both tokenizers on the corpus of the test, rounded up.
var (
	costStart = [numClasses]int64{classDigit: 16, classSpace: 13, classTab: 1, classNL: 16, classCR: 1, classPunct: 16}
	costMore  = [numClasses]int64{classDigit: 9, classSpace: 3, classTab: 16, classNL: 1, classCR: 1, classPunct: 11}
)

const costLowerMore = 2

// costRune is what a valid non-ASCII character of each width costs, and
// costBad an invalid byte (sent as U+FFFD), in sixteenths of a token.
var costRune = [utf8.UTFMax + 1]int64{2: 24, 3: 44, 4: 48}

const costBad = 16

// classOf is the class of an ASCII byte.
func classOf(b byte) int {
	switch {
	case b >= 'a' && b <= 'z':
		return classLower
	case b >= 'A' && b <= 'Z':
		return classUpper
	case b >= '0' && b <= '9':
		return classDigit
	case b == ' ':
		return classSpace
	case b == '\t':
		return classTab
	case b == '\n':
		return classNL
	case b == '\r':
		return classCR
	case b < 0x20 || b == 0x7f:
		return classCtrl
	}
	return classPunct
}
