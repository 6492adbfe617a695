package tool

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	var many strings.Builder
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&many, "line %d\n", i)
	}
	big := strings.Repeat("0123456789abcdef\n", 20000) // 340000 bytes
	_, env := newEnv(t, map[string]string{
		"a.txt":        "one\ntwo\nthree\n",
		"nonl.txt":     "one\ntwo",
		"crlf.txt":     "one\r\ntwo\r\n",
		"empty.txt":    "",
		"utf8.txt":     "héllo wörld ✓\n",
		"many.txt":     many.String(),
		"big.txt":      big,
		"long.txt":     strings.Repeat("x", 100000) + "\nshort\n",
		"nul.bin":      "text\x00more",
		"latin1.txt":   "caf\xe9\n",
		"late_nul.bin": strings.Repeat("a\n", 10000) + "\x00",
		"dir/x.txt":    "x\n",
	})
	tests := []struct {
		name    string
		args    any
		want    string // the exact output, or a part of it when contains is set
		isError bool
		has     []string
	}{
		{name: "whole file", args: obj{"path": "a.txt"}, want: "a.txt (lines 1-3 of 3)\none\ntwo\nthree\n"},
		{name: "no final newline", args: obj{"path": "nonl.txt"}, want: "nonl.txt (lines 1-2 of 2)\none\ntwo"},
		{name: "crlf kept", args: obj{"path": "crlf.txt"}, want: "crlf.txt (lines 1-2 of 2)\none\r\ntwo\r\n"},
		{name: "utf8", args: obj{"path": "utf8.txt"}, want: "utf8.txt (lines 1-1 of 1)\nhéllo wörld ✓\n"},
		{name: "empty", args: obj{"path": "empty.txt"}, want: "empty.txt (empty file, 0 lines)"},
		{name: "range", args: obj{"path": "a.txt", "start_line": 2, "end_line": 3}, want: "a.txt (lines 2-3 of 3)\ntwo\nthree\n"},
		{name: "one line", args: obj{"path": "a.txt", "start_line": 2, "end_line": 2}, want: "a.txt (lines 2-2 of 3)\ntwo\n"},
		{name: "start only", args: obj{"path": "a.txt", "start_line": 3}, want: "a.txt (lines 3-3 of 3)\nthree\n"},
		{name: "end only", args: obj{"path": "a.txt", "end_line": 1}, want: "a.txt (lines 1-1 of 3)\none\n"},
		{name: "end past the end", args: obj{"path": "nonl.txt", "start_line": 2, "end_line": 99}, want: "nonl.txt (lines 2-2 of 2)\ntwo"},
		{name: "range deep in a big file", args: obj{"path": "many.txt", "start_line": 150000, "end_line": 150002},
			want: "many.txt (lines 150000-150002 of 200000)\nline 150000\nline 150001\nline 150002\n"},
		{name: "range of a file over the whole-file limit", args: obj{"path": "big.txt", "start_line": 19999},
			want: "big.txt (lines 19999-20000 of 20000)\n0123456789abcdef\n0123456789abcdef\n"},
		{name: "start past the end", args: obj{"path": "a.txt", "start_line": 4}, isError: true,
			want: "start_line 4 is past the end of a.txt, which has 3 lines"},
		{name: "range of an empty file", args: obj{"path": "empty.txt", "start_line": 1}, isError: true, want: "empty.txt is empty (0 lines)"},
		{name: "end before start", args: obj{"path": "a.txt", "start_line": 3, "end_line": 2}, isError: true,
			has: []string{`"end_line"`, "before start_line"}},
		{name: "negative start", args: obj{"path": "a.txt", "start_line": -1}, isError: true, has: []string{`"start_line"`, "1 or more", "-1"}},
		{name: "zero end", args: obj{"path": "a.txt", "end_line": 0}, isError: true, has: []string{`"end_line"`, "1 or more"}},
		{name: "start as a string", args: `{"path": "a.txt", "start_line": "2"}`, isError: true, has: []string{`"start_line"`, "an integer", "string"}},
		{name: "fractional start", args: `{"path": "a.txt", "start_line": 1.5}`, isError: true, has: []string{`"start_line"`, "an integer"}},
		{name: "unknown field", args: obj{"path": "a.txt", "lines": "1-2"}, isError: true, has: []string{`"lines"`, "unknown field", "end_line, path, start_line"}},
		{name: "missing path", args: obj{}, isError: true, has: []string{`"path"`, "missing required field", "a string"}},
		{name: "missing file", args: obj{"path": "nope.txt"}, isError: true, want: "nope.txt: no such file or directory"},
		{name: "directory", args: obj{"path": "dir"}, isError: true, has: []string{"dir is a directory", "list_dir"}},
		{name: "too big whole", args: obj{"path": "big.txt"}, isError: true,
			want: "big.txt has 340000 bytes and 20000 lines, over the 262144-byte (256 KiB) limit for reading a whole file; ask for a line range with start_line and end_line"},
		{name: "binary NUL", args: obj{"path": "nul.bin"}, isError: true, want: "nul.bin: binary file, 9 bytes; read_file shows text files only"},
		{name: "binary NUL by range", args: obj{"path": "nul.bin", "start_line": 1}, isError: true, has: []string{"binary file, 9 bytes"}},
		{name: "binary invalid UTF-8", args: obj{"path": "latin1.txt"}, isError: true, has: []string{"binary file, 5 bytes"}},
		{name: "binary invalid UTF-8 by range", args: obj{"path": "latin1.txt", "end_line": 1}, isError: true, has: []string{"binary file, 5 bytes"}},
		{name: "NUL after the sniffed head is text", args: obj{"path": "late_nul.bin", "start_line": 10001}, want: "late_nul.bin (lines 10001-10001 of 10001)\n\x00"},
		{name: "range output bounded", args: obj{"path": "many.txt", "start_line": 10},
			has: []string{"many.txt (lines 10-", "\nline 10\n", "not shown, as the output limit is 32768 bytes; call read_file with start_line="}},
		{name: "whole file output bounded", args: obj{"path": "long.txt"},
			has: []string{"long.txt (lines 1-1 of 2)\nxxx", "[line 1 has 100000 bytes; only its first", "[lines 2-2 not shown; call read_file with start_line=2 to continue]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "read_file", tt.args)
			if r.IsError != tt.isError {
				t.Fatalf("IsError = %v, want %v; output %.300q", r.IsError, tt.isError, r.Output)
			}
			if tt.want != "" && r.Output != tt.want {
				t.Errorf("got\n%.500q\nwant\n%.500q", r.Output, tt.want)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Output, h) {
					t.Errorf("output %q does not contain %q", r.Output[:min(len(r.Output), 500)], h)
				}
			}
		})
	}
}

// TestReadFileBoundedRangeIsExact checks that a range cut by the output
// limit shows whole lines, exactly, and that continuing from the line it
// names reads the rest.
func TestReadFileBoundedRangeIsExact(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&b, "%d: %s\n", i, strings.Repeat("é", i%40))
	}
	content := b.String()
	_, env := newEnv(t, map[string]string{"f.txt": content})
	var got strings.Builder
	start := 1
	for range 100 {
		r := call(t, env, "read_file", obj{"path": "f.txt", "start_line": start})
		if r.IsError {
			t.Fatal(r.Output)
		}
		header, rest, _ := strings.Cut(r.Output, "\n")
		var from, to, total int
		if _, err := fmt.Sscanf(header, "f.txt (lines %d-%d of %d)", &from, &to, &total); err != nil || from != start || total != 5000 {
			t.Fatalf("header %q: %v", header, err)
		}
		body, trailer, cut := strings.Cut(rest, "\n[lines ")
		if cut {
			body += "\n"
		}
		got.WriteString(body)
		if !cut {
			break
		}
		if want := fmt.Sprintf("%d-5000 not shown", to+1); !strings.HasPrefix(trailer, want) {
			t.Fatalf("trailer %q, want prefix %q", trailer, want)
		}
		start = to + 1
	}
	if got.String() != content {
		t.Errorf("reading by continuation did not give the file back")
	}
}

// TestLineSel checks the streaming line selection against a plain one on
// random files cut into random pieces.
func TestLineSel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 3000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(strings.Repeat("é", r.IntN(6)) + strings.Repeat("x", r.IntN(5)))
			if r.IntN(5) != 0 {
				b.WriteByte('\n')
			}
		}
		content := b.String()
		start := 1 + r.IntN(5)
		end := 0
		if r.IntN(2) == 0 {
			end = start + r.IntN(5)
		}
		budget := 1 + r.IntN(30)

		s := lineSel{start: start, end: end, budget: budget}
		for rest := content; rest != ""; {
			n := min(len(rest), 1+r.IntN(7))
			s.feed([]byte(rest[:n]))
			rest = rest[n:]
		}
		s.finish()

		// The plain way.
		lines := strings.SplitAfter(content, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if s.total != len(lines) {
			t.Fatalf("%d: %q: total %d, want %d", iter, content, s.total, len(lines))
		}
		var out []byte
		last, cut, partial := 0, 0, false
		for i := start; i <= len(lines) && (end == 0 || i <= end); i++ {
			l := lines[i-1]
			if len(out)+len(l) > budget {
				cut = i
				if len(out) == 0 {
					out = trimPartialRune([]byte(l[:budget]))
					partial = true
				}
				break
			}
			out = append(out, l...)
			last = i
		}
		if string(s.out) != string(out) || s.last != last || s.cut != cut || s.partial != partial {
			t.Fatalf("%d: %q lines %d-%d budget %d:\ngot  %q last %d cut %d partial %v\nwant %q last %d cut %d partial %v",
				iter, content, start, end, budget, s.out, s.last, s.cut, s.partial, out, last, cut, partial)
		}
		if partial && s.cutLen != len(strings.TrimSuffix(lines[cut-1], "\n")) {
			t.Fatalf("%d: cutLen %d, want %d", iter, s.cutLen, len(strings.TrimSuffix(lines[cut-1], "\n")))
		}
	}
}
