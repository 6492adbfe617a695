package tool

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// matcher decides which lines of a file match a grep pattern. A line is
// the text between newlines, without the newline; a "\r" before it stays
// part of the line.
//
// When every match of the pattern must hold one of a few literal strings,
// those are searched in the whole file, and only the lines that hold one
// are given to the regexp: the prefilter. It never drops a line the
// regexp alone would match; it only spares the regexp the other lines.
type matcher struct {
	re   *regexp.Regexp // nil: the one literal alone decides
	lits [][]byte       // one of them is in every matching line; nil: no prefilter
	fold bool           // lits are lower-case, to be found in ASCII-lowered text
	fnds []finder       // find lits
}

// maxAlternates is the most literals a prefilter searches for at once.
const maxAlternates = 8

// newMatcher compiles a grep pattern.
func newMatcher(pattern string, literal, ignoreCase bool) (*matcher, error) {
	if pattern == "" {
		return nil, &argError{Field: "pattern", Msg: "the pattern is empty"}
	}
	if literal && strings.Contains(pattern, "\n") {
		return nil, &argError{Field: "pattern", Msg: "the pattern holds a newline, but grep matches one line at a time"}
	}
	if literal && !ignoreCase {
		return newLitMatcher(nil, candidate{lits: [][]byte{[]byte(pattern)}}), nil
	}
	expr := pattern
	if literal {
		expr = regexp.QuoteMeta(pattern)
	}
	if ignoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, &argError{Field: "pattern", Msg: fmt.Sprintf("invalid regular expression (Go RE2 syntax): %v; "+
			"set literal to true to search for the text as it is", strings.TrimPrefix(err.Error(), "error parsing regexp: "))}
	}
	syn, err := syntax.Parse(expr, syntax.Perl)
	if err != nil { // regexp.Compile parsed it the same way
		return nil, &argError{Field: "pattern", Msg: err.Error()}
	}
	if hasNewline(syn) {
		return nil, &argError{Field: "pattern", Msg: "the pattern holds a literal newline, but grep matches one line at a time"}
	}
	syn = syn.Simplify()
	for syn.Op == syntax.OpCapture {
		syn = syn.Sub[0]
	}
	if syn.Op == syntax.OpLiteral && syn.Flags&syntax.FoldCase == 0 && !slices.Contains(syn.Rune, utf8.RuneError) {
		return newLitMatcher(nil, candidate{lits: [][]byte{[]byte(string(syn.Rune))}}), nil
	}
	var best candidate
	requiredLiteral(syn, &best)
	return newLitMatcher(re, best), nil
}

// newLitMatcher returns a matcher with the regexp re, nil when the one
// literal of c alone decides, and the prefilter c.
func newLitMatcher(re *regexp.Regexp, c candidate) *matcher {
	m := &matcher{re: re, lits: c.lits, fold: c.fold}
	for _, l := range c.lits {
		m.fnds = append(m.fnds, newFinder(l))
	}
	return m
}

// hasNewline reports whether re holds a literal newline.
func hasNewline(re *syntax.Regexp) bool {
	if re.Op == syntax.OpLiteral && slices.Contains(re.Rune, '\n') {
		return true
	}
	return slices.ContainsFunc(re.Sub, hasNewline)
}

// candidate is a prefilter: literals one of which every match holds, in
// the form the prefilter searches for them.
type candidate struct {
	lits [][]byte
	fold bool // lits are lower-case, to be found in ASCII-lowered text
}

// score rates c as a prefilter, higher being better: long literals, few
// of them, no case folding. -1 for no prefilter.
func (c *candidate) score() int {
	if len(c.lits) == 0 {
		return -1
	}
	short := len(c.lits[0])
	for _, l := range c.lits {
		short = min(short, len(l))
	}
	s := 4*short - 6*(len(c.lits)-1)
	if !c.fold {
		s++
	}
	return max(0, s)
}

// offer makes c the best candidate if it beats best.
func (best *candidate) offer(c candidate) {
	if c.score() > best.score() {
		*best = c
	}
}

// consider offers the longest usable piece of the literal runes, which is
// case-folded when fold is set.
//
// A case-sensitive literal is searched byte for byte, which is exact for
// any valid UTF-8 except U+FFFD, which the regexp also matches for an
// invalid byte. A case-folded literal is searched in ASCII-lowered text,
// which is exact for ASCII runes whose case-folding orbit is all ASCII
// ('k' and 's' are not: the Kelvin sign and the long s fold to them).
func (best *candidate) consider(runes []rune, fold bool) {
	usable := func(r rune) bool {
		if r == utf8.RuneError || r == '\n' {
			return false
		}
		if !fold {
			return true
		}
		if r >= utf8.RuneSelf {
			return false
		}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f >= utf8.RuneSelf {
				return false
			}
		}
		return true
	}
	var piece []rune
	for i := 0; i < len(runes); {
		j := i
		for j < len(runes) && usable(runes[j]) {
			j++
		}
		if j-i > len(piece) {
			piece = runes[i:j]
		}
		i = j + 1
	}
	if len(piece) == 0 {
		return
	}
	lit := []byte(string(piece))
	if fold {
		lit = bytes.ToLower(lit)
	}
	best.offer(candidate{lits: [][]byte{lit}, fold: fold})
}

// requiredLiteral offers to best the prefilters that every match of re
// must pass. When re matches exactly one string (up to case, for fold) it
// returns that string's runes and ok; zero-width assertions match the
// empty string for this purpose, which only weakens the claim to "every
// match holds this string".
func requiredLiteral(re *syntax.Regexp, best *candidate) (exact []rune, fold, ok bool) {
	switch re.Op {
	case syntax.OpLiteral:
		fold = re.Flags&syntax.FoldCase != 0
		best.consider(re.Rune, fold)
		return re.Rune, fold, true
	case syntax.OpCharClass:
		if len(re.Rune) == 2 && re.Rune[0] == re.Rune[1] {
			best.consider(re.Rune[:1], false)
			return re.Rune[:1], false, true
		}
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, false, true
	case syntax.OpCapture:
		return requiredLiteral(re.Sub[0], best)
	case syntax.OpPlus:
		requiredLiteral(re.Sub[0], best)
	case syntax.OpRepeat:
		if re.Min >= 1 {
			requiredLiteral(re.Sub[0], best)
		}
	case syntax.OpAlternate:
		// Every match holds a literal of one branch or another.
		var set candidate
		for _, sub := range re.Sub {
			var b candidate
			requiredLiteral(sub, &b)
			if len(b.lits) == 0 || len(set.lits)+len(b.lits) > maxAlternates {
				return nil, false, false
			}
			set.lits = append(set.lits, b.lits...)
			set.fold = set.fold || b.fold
		}
		if set.fold {
			// Lowered, a case-sensitive literal still finds its lines
			// in lowered text, and some more, which the regexp rejects.
			for i, l := range set.lits {
				set.lits[i] = asciiLower(nil, l)
			}
		}
		best.offer(set)
	case syntax.OpConcat:
		var run []rune
		runFold, all := false, true
		for _, sub := range re.Sub {
			e, f, ok := requiredLiteral(sub, best)
			switch {
			case !ok:
				best.consider(run, runFold)
				run, all = nil, false
			case len(e) == 0:
			case len(run) == 0:
				run, runFold = slices.Clone(e), f
			case f == runFold:
				run = append(run, e...)
			default:
				best.consider(run, runFold)
				run, runFold, all = slices.Clone(e), f, false
			}
		}
		best.consider(run, runFold)
		return run, runFold, all
	}
	return nil, false, false
}

// span is a matching line: its number, from 1, and its bounds in the file.
type span struct{ num, start, end int }

// scan appends the matching lines of data to hits, in order. lower is
// scratch space for a case-folded prefilter.
func (m *matcher) scan(data []byte, lower *[]byte, hits []span) []span {
	if m.lits == nil {
		num := 1
		for pos := 0; pos < len(data); num++ {
			end := len(data)
			if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
				end = pos + i
			}
			if m.re.Match(data[pos:end]) {
				hits = append(hits, span{num, pos, end})
			}
			pos = end + 1
		}
		return hits
	}
	hay := data
	if m.fold {
		*lower = asciiLower(*lower, data)
		hay = *lower
	}
	// next[k] is where lits[k] next occurs at or after the line being
	// searched: -1 when it does not, math.MinInt before it is looked for.
	var nextBuf [maxAlternates]int
	next := nextBuf[:len(m.fnds)]
	for k := range next {
		next[k] = math.MinInt
	}
	num, counted := 1, 0
	for pos := 0; pos < len(data); {
		i := -1
		for k := range next {
			if next[k] != -1 && next[k] < pos {
				next[k] = m.fnds[k].index(hay[pos:])
				if next[k] >= 0 {
					next[k] += pos
				}
			}
			if next[k] >= 0 && (i < 0 || next[k] < i) {
				i = next[k]
			}
		}
		if i < 0 {
			break
		}
		start := pos
		if j := bytes.LastIndexByte(data[pos:i], '\n'); j >= 0 {
			start = pos + j + 1
		}
		end := len(data)
		if j := bytes.IndexByte(data[i:], '\n'); j >= 0 {
			end = i + j
		}
		num += bytes.Count(data[counted:start], []byte{'\n'})
		counted = start
		if m.re == nil || m.re.Match(data[start:end]) {
			hits = append(hits, span{num, start, end})
		}
		pos = end + 1
	}
	return hits
}

// find returns where the match in the matching line starts, or 0.
func (m *matcher) find(line []byte) int {
	if m.re != nil {
		if loc := m.re.FindIndex(line); loc != nil {
			return loc[0]
		}
		return 0
	}
	return max(0, bytes.Index(line, m.lits[0]))
}

// asciiLower returns src with ASCII upper-case letters lowered, in dst's
// storage when it is large enough. It works eight bytes at a time.
func asciiLower(dst, src []byte) []byte {
	const ones = 0x0101010101010101
	dst = slices.Grow(dst[:0], len(src))[:len(src)]
	i := 0
	for ; i+8 <= len(src); i += 8 {
		w := binary.LittleEndian.Uint64(src[i:])
		h := w & (0x7f * ones)                             // each byte without its top bit
		ge := h + (0x80-'A')*ones                          // top bit set where h >= 'A'
		gt := h + (0x80-'Z'-1)*ones                        // top bit set where h > 'Z'
		upper := ge &^ gt &^ w & (0x80 * ones)             // top bit set on 'A'-'Z'
		binary.LittleEndian.PutUint64(dst[i:], w|upper>>2) // 0x80>>2 is 'a'-'A'
	}
	for ; i < len(src); i++ {
		c := src[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst[i] = c
	}
	return dst
}
