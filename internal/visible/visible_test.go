package visible

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"two\nlines\tand a tab", "two\nlines\tand a tab"},
		{"x \x1b[2J\x1b]0;PWNED\x07", `x \x1b[2J\x1b]0;PWNED\x07`},
		{"fake\rline", `fake\rline`},
		{"back\bspace and del\x7f", `back\x08space and del\x7f`},
		{"nul\x00", `nul\x00`},
		{"c1 csi \u009b2J", `c1 csi \u009b2J`},
		{"bidi \u202eevil\u2066", `bidi \u202eevil\u2066`},
		{"bad utf-8 \xff\xc3", `bad utf-8 \xff\xc3`},
		{`a backslash \x1b stays`, `a backslash \x1b stays`},
		{"", ""},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzText: whatever comes in, what goes out is valid UTF-8 with no byte a
// terminal acts on but a newline and a tab, and text with none of them
// comes out unchanged.
func FuzzText(f *testing.F) {
	for _, s := range []string{"x \x1b[2J\x1b]0;PWNED\x07", "ok\n", "\u009b\u202e\xff", "\r\b\x7f", "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Text(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q: not UTF-8", s, got)
		}
		for i, r := range got {
			if unsafe(r, utf8.RuneLen(r)) {
				t.Fatalf("Text(%q) = %q: %U at %d", s, got, r, i)
			}
		}
		clean := true
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			clean = clean && !unsafe(r, n)
			i += n
		}
		if clean != (got == s) {
			t.Fatalf("Text(%q) = %q: clean input %v, unchanged %v", s, got, clean, got == s)
		}
		if strings.Count(got, "\n") != strings.Count(s, "\n") {
			t.Fatalf("Text(%q) = %q: the lines changed", s, got)
		}
	})
}
