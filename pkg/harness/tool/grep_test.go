package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGrep(t *testing.T) {
	dir, env := newEnv(t, map[string]string{
		"a.go":              "package a\n\nfunc Foo(ctx context.Context) {}\nfunc bar() {}\n// TODO: fix a.b\n",
		"b/b.go":            "package b\nfunc FooContext(ctx context.Context) error {\n\treturn nil\n}\n",
		"b/c.txt":           "Foo\nfoo\nFOO\naxb\n",
		".git/x":            "Foo\n",
		"node_modules/m.js": "Foo\n",
		"b/target/t":        "Foo\n",
		"bin.dat":           "Foo\x00",
		"long.txt":          strings.Repeat("x", 1000) + "Foo" + strings.Repeat("y", 1000) + "\n",
		"crlf.txt":          "Foo\r\nbar\r\n",
		"ctx/c.txt":         "1\n2\n3\nmatch\n5\n6\n7\n8\n9\nmatch\n11\nmatch\n",
		"many.txt":          strings.Repeat("hit\n", 150),
		"wide.txt":          strings.Repeat(strings.Repeat("w", 250)+"\n", 1000),
	})
	symlink(t, "a.go", filepath.Join(dir, "link.go"))
	long := "long.txt:1:[… 950 bytes] " + strings.Repeat("x", 50) + "Foo" + strings.Repeat("y", 247) + " [… 753 more bytes]"

	tests := []struct {
		name    string
		args    any
		want    string
		isError bool
		has     []string
	}{
		{name: "regex", args: obj{"pattern": `func \w+\(`, "include": []string{"*.go"}},
			want: "a.go:3:func Foo(ctx context.Context) {}\na.go:4:func bar() {}\nb/b.go:2:func FooContext(ctx context.Context) error {"},
		{name: "regex sorted by path then line", args: obj{"pattern": `^Foo|Foo\(|FooC|Fooy`},
			want: "a.go:3:func Foo(ctx context.Context) {}\nb/b.go:2:func FooContext(ctx context.Context) error {\nb/c.txt:1:Foo\ncrlf.txt:1:Foo\n" + long},
		{name: "literal", args: obj{"pattern": "a.b", "literal": true}, want: "a.go:5:// TODO: fix a.b"},
		{name: "regex dot", args: obj{"pattern": "a.b", "include": []string{"**/*.txt", "a.go"}}, want: "a.go:5:// TODO: fix a.b\nb/c.txt:4:axb"},
		{name: "ignore case", args: obj{"pattern": "^foo$", "ignore_case": true}, want: "b/c.txt:1:Foo\nb/c.txt:2:foo\nb/c.txt:3:FOO"},
		{name: "ignore case literal", args: obj{"pattern": "FOO", "literal": true, "ignore_case": true, "path": "b/c.txt"},
			want: "b/c.txt:1:Foo\nb/c.txt:2:foo\nb/c.txt:3:FOO"},
		{name: "path is a file", args: obj{"pattern": "nil", "path": "b/b.go"}, want: "b/b.go:3:\treturn nil"},
		{name: "path is a directory", args: obj{"pattern": "Foo", "path": "b"},
			want: "b/b.go:2:func FooContext(ctx context.Context) error {\nb/c.txt:1:Foo"},
		{name: "skipped directory named as path", args: obj{"pattern": "Foo", "path": "node_modules"}, want: "node_modules/m.js:1:Foo"},
		{name: "include relative to path", args: obj{"pattern": "Foo", "path": "b", "include": []string{"c.*"}}, want: "b/c.txt:1:Foo"},
		{name: "include path glob", args: obj{"pattern": "Foo", "include": []string{"b/**"}},
			want: "b/b.go:2:func FooContext(ctx context.Context) error {\nb/c.txt:1:Foo"},
		{name: "binary file named", args: obj{"pattern": "Foo", "path": "bin.dat"}, want: "bin.dat: binary file, 4 bytes, not searched"},
		{name: "context", args: obj{"pattern": "^match$", "path": "ctx", "context": 1},
			want: "ctx/c.txt-3-3\nctx/c.txt:4:match\nctx/c.txt-5-5\n--\nctx/c.txt-9-9\nctx/c.txt:10:match\nctx/c.txt-11-11\nctx/c.txt:12:match"},
		{name: "context joins", args: obj{"pattern": "^match$", "path": "ctx", "context": 3},
			want: "ctx/c.txt-1-1\nctx/c.txt-2-2\nctx/c.txt-3-3\nctx/c.txt:4:match\nctx/c.txt-5-5\nctx/c.txt-6-6\nctx/c.txt-7-7\nctx/c.txt-8-8\nctx/c.txt-9-9\nctx/c.txt:10:match\nctx/c.txt-11-11\nctx/c.txt:12:match"},
		{name: "context cut by max_results", args: obj{"pattern": "^match$", "path": "ctx", "context": 2, "max_results": 1},
			want: "ctx/c.txt-2-2\nctx/c.txt-3-3\nctx/c.txt:4:match\nctx/c.txt-5-5\nctx/c.txt-6-6\n[2 more matching lines not shown, 3 in 1 file in all; narrow the pattern, path or include, or raise max_results (at most 1000)]"},
		{name: "context across files", args: obj{"pattern": "^Foo", "context": 1, "include": []string{"*.txt"}},
			want: "b/c.txt:1:Foo\nb/c.txt-2-foo\n--\ncrlf.txt:1:Foo\ncrlf.txt-2-bar"},
		{name: "cap", args: obj{"pattern": "^hit$"},
			has: []string{"many.txt:100:hit\n[50 more matching lines not shown, 150 in 1 file in all;"}},
		{name: "cap raised", args: obj{"pattern": "^hit$", "max_results": 150}, has: []string{"many.txt:150:hit"}},
		{name: "cap over the hard max", args: obj{"pattern": "^hit$", "max_results": 5000}, has: []string{"many.txt:150:hit"}},
		{name: "output limit", args: obj{"pattern": "^w", "max_results": 1000},
			has: []string{"wide.txt:1:www", "more matching lines not shown, 1000 in 1 file in all; the output limit was reached;"}},
		{name: "long line cut around the match", args: obj{"pattern": "Foo", "path": "long.txt"}, want: long},
		{name: "no matches", args: obj{"pattern": "zzz"}, want: `no matches for "zzz" in .`},
		{name: "empty pattern", args: obj{"pattern": ""}, isError: true, has: []string{`"pattern"`, "empty"}},
		{name: "invalid regex", args: obj{"pattern": "func (", "path": "a.go"}, isError: true,
			has: []string{`"pattern"`, "invalid regular expression", "missing closing )", "literal"}},
		{name: "newline", args: obj{"pattern": `a\nb`}, isError: true, has: []string{`"pattern"`, "newline"}},
		{name: "literal newline", args: obj{"pattern": "a\nb", "literal": true}, isError: true, has: []string{`"pattern"`, "newline"}},
		{name: "malformed include", args: obj{"pattern": "x", "include": []string{"*.go", "{a,"}}, isError: true, has: []string{`"include[1]"`, "malformed glob"}},
		{name: "include not a list", args: obj{"pattern": "x", "include": "*.go"}, isError: true, has: []string{`"include"`, "an array of strings"}},
		{name: "negative context", args: obj{"pattern": "x", "context": -1}, isError: true, has: []string{`"context"`, "-1"}},
		{name: "negative max", args: obj{"pattern": "x", "max_results": -1}, isError: true, has: []string{`"max_results"`}},
		{name: "missing path", args: obj{"pattern": "x", "path": "nope"}, isError: true, want: "nope: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "grep", tt.args)
			if r.IsError != tt.isError {
				t.Fatalf("IsError = %v, want %v: %q", r.IsError, tt.isError, r.Output)
			}
			if tt.want != "" && r.Output != tt.want {
				t.Errorf("got\n%s\nwant\n%s", r.Output, tt.want)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Output, h) {
					t.Errorf("output %.400q does not contain %q", r.Output, h)
				}
			}
		})
	}
}

func TestGrepCancelled(t *testing.T) {
	_, env := newEnv(t, map[string]string{"a.txt": "x\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tl := range Workspace() {
		r := tl.Call(ctx, env, json.RawMessage(`{"pattern": "x", "path": "a.txt", "content": ""}`))
		if !r.IsError || !strings.Contains(r.Output, "cancel") {
			t.Errorf("%s: got %+v, want a cancelled error", tl.Spec().Name, r)
		}
	}
}

func TestRequiredLiteral(t *testing.T) {
	tests := []struct {
		pattern    string
		ignoreCase bool
		lits       string // the prefilter literals, joined with |
		fold, re   bool
	}{
		{`func \w+Context\(`, false, "Context(", false, true},
		{`Context`, false, "Context", false, false},
		{`(Context)`, false, "Context", false, false},
		{`^Context`, false, "Context", false, true},
		{`foo|bar`, false, "foo|bar", false, true},
		{`foo|bar|`, false, "", false, true},
		{`(?i)foo|Bar`, false, "foo|bar", true, true},
		{`(?i:foo)|Bar`, false, "foo|bar", true, true},
		{`foo|b`, false, "foo|b", false, true},
		{`(foo|bar)bazz`, false, "bazz", false, true},
		{`a|b|c|d|e|f|g|h|i`, false, "", false, true},
		{`(foo)+bar`, false, "foo", false, true},
		{`x(abc){2,}y`, false, "abc", false, true},
		{`x(abc)*y`, false, "x", false, true},
		{`context\.Context`, true, "context.context", true, true},
		{`Kubernetes`, true, "ubernete", true, true},
		{`ss`, true, "", false, true},
		{`é+x`, true, "x", true, true},
		{`\x{FFFD}abc`, false, "abc", false, true},
		{`[a]bc`, false, "abc", false, false},
		{`\d+`, false, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			m, err := newMatcher(tt.pattern, false, tt.ignoreCase)
			if err != nil {
				t.Fatal(err)
			}
			lits := string(bytes.Join(m.lits, []byte("|")))
			if lits != tt.lits || m.fold != tt.fold || (m.re != nil) != tt.re {
				t.Errorf("got lits %q fold %v regexp %v; want %q %v %v", lits, m.fold, m.re != nil, tt.lits, tt.fold, tt.re)
			}
		})
	}
}

func TestASCIILower(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 100 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.IntN(256))
		}
		want := make([]byte, n)
		for i, c := range src {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			want[i] = c
		}
		if got := asciiLower(nil, src); !bytes.Equal(got, want) {
			t.Fatalf("asciiLower(%q) = %q, want %q", src, got, want)
		}
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if got := asciiLower(nil, all); string(got[64:92]) != "@abcdefghijklmnopqrstuvwxyz[" || !bytes.Equal(got[92:], all[92:]) || !bytes.Equal(got[:64], all[:64]) {
		t.Errorf("asciiLower of all bytes: %q", got)
	}
}

func TestFinder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		const alphabet = "abcAB(.\n"
		hay := make([]byte, r.IntN(200))
		for i := range hay {
			hay[i] = alphabet[r.IntN(len(alphabet))]
		}
		lit := make([]byte, 1+r.IntN(4))
		for i := range lit {
			lit[i] = alphabet[r.IntN(len(alphabet))]
		}
		f := newFinder(lit)
		if got, want := f.index(hay), bytes.Index(hay, lit); got != want {
			t.Fatalf("index(%q, %q) = %d, want %d", hay, lit, got, want)
		}
	}
}

// genTree writes a pseudo-random tree of n files under dir, with the
// cases grep must get right: binary files, skipped directories, symlinks,
// CRLF, long lines, runes that fold to ASCII, invalid UTF-8, and no final
// newline.
func genTree(t testing.TB, dir string, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"func", "Context", "context", "ctx", "(", ")", "foo", "bar", "Foo", "BAR", " ", " ", " ", "\t",
		"kelvin", "\u212a", "ſ", "S", "é", "É", "a.b", "axb", "\xff", "\uFFFD", "return", "err", "nil", "x", "xx", "FooContext(",
		"func NewContext(", "WithContext(", "// ", "TODO", "match"}
	dirs := []string{"", "d1/", "d1/d2/", "d1/d2/d3/", "d4/", "d4/d5/", ".git/", "node_modules/pkg/", "d4/target/", ".hidden/", "d1/d2/d3/d6/d7/"}
	exts := []string{".go", ".txt", ".md", "", ".js"}
	for i := range n {
		var b strings.Builder
		lines := r.IntN(60)
		for l := range lines {
			switch r.IntN(40) {
			case 0:
				b.WriteString(strings.Repeat("long ", 100))
			case 1:
				// an empty line
			default:
				for range r.IntN(12) {
					b.WriteString(words[r.IntN(len(words))])
				}
			}
			switch {
			case l == lines-1 && r.IntN(4) == 0: // no final newline
			case r.IntN(10) == 0:
				b.WriteString("\r\n")
			default:
				b.WriteString("\n")
			}
		}
		content := b.String()
		switch r.IntN(50) {
		case 0:
			content = "bin\x00" + content
		case 1:
			content = strings.Repeat("y", binarySniff) + content + "\x00" // a NUL after the head: text
		}
		name := fmt.Sprintf("%sf%04d%s", dirs[r.IntN(len(dirs))], i, exts[r.IntN(len(exts))])
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if i%200 == 0 {
			_ = os.Symlink("f"+fmt.Sprint(i)+".go", filepath.Join(dir, fmt.Sprintf("link%04d.go", i)))
			_ = os.Symlink(filepath.Join(dir, filepath.FromSlash(name)), filepath.Join(dir, fmt.Sprintf("abslink%04d.go", i)))
		}
	}
}

// refGrep is a plain sequential grep, the reference the parallel one must
// agree with: it walks with filepath.WalkDir, reads whole files with
// os.ReadFile, splits them into lines and tries every line, without a
// prefilter.
func refGrep(t testing.TB, dir string, a grepArgs) string {
	t.Helper()
	q, err := newGrepQuery(&a)
	if err != nil {
		t.Fatal(err)
	}
	start := a.Path
	if start == "" {
		start = "."
	}
	q.dir = start
	match := func(line string) bool { return strings.Contains(line, a.Pattern) }
	if !a.Literal || a.IgnoreCase {
		expr := a.Pattern
		if a.Literal {
			expr = regexp.QuoteMeta(expr)
		}
		if a.IgnoreCase {
			expr = "(?i)" + expr
		}
		match = regexp.MustCompile(expr).MatchString
	}
	col := &collector{max: q.max}
	startAbs := filepath.Join(dir, filepath.FromSlash(start))
	err = filepath.WalkDir(startAbs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != startAbs && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if !q.included(rel, d.Name()) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if len(data) == 0 || hasNUL(data) {
			return nil
		}
		lines := strings.Split(string(data), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		show := make([]bool, len(lines))
		isMatch := make([]bool, len(lines))
		count := 0
		for i, l := range lines {
			if match(l) {
				count++
				isMatch[i] = true
				for j := max(0, i-q.context); j <= min(len(lines)-1, i+q.context); j++ {
					show[j] = true
				}
			}
		}
		if count == 0 {
			return nil
		}
		f := fileHits{path: rel, count: count}
		for i, l := range lines {
			if show[i] {
				f.lines = append(f.lines, hitLine{num: i + 1, text: q.clip([]byte(l), isMatch[i]), match: isMatch[i]})
			}
		}
		col.files = append(col.files, f)
		col.total += count
		col.nfiles++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sortHits(col.files)
	return q.render(col, a.Pattern, start, &grepStats{}, 0)
}

func TestGrepMatchesSequential(t *testing.T) {
	dir, env := newEnv(t, nil)
	genTree(t, dir, 3000)
	cases := []grepArgs{
		{Pattern: `func \w+Context\(`},
		{Pattern: `Context`, Literal: true},
		{Pattern: `Context(`, Literal: true, MaxResults: ptr(1000)},
		{Pattern: `context`, IgnoreCase: true},
		{Pattern: `CONTEXT(`, Literal: true, IgnoreCase: true, Context: ptr(2)},
		{Pattern: `kelvin`, IgnoreCase: true, MaxResults: ptr(1000)},
		{Pattern: `s`, IgnoreCase: true, MaxResults: ptr(50)},
		{Pattern: `ſ`},
		{Pattern: `é`, IgnoreCase: true, Path: "d4"},
		{Pattern: `^$`, MaxResults: ptr(1000)},
		{Pattern: `x*`, MaxResults: ptr(1000)},
		{Pattern: `a.b`, Literal: true},
		{Pattern: `a.b`},
		{Pattern: `\bfoo\b`, Context: ptr(2)},
		{Pattern: `Context`, Context: ptr(3), MaxResults: ptr(7)},
		{Pattern: `Context`, Context: ptr(1), MaxResults: ptr(1000)},
		{Pattern: `\x{FFFD}`},
		{Pattern: "\uFFFD", Literal: true},
		{Pattern: `[Cc]ontext\(ctx`},
		{Pattern: `foo|bar`, IgnoreCase: true},
		{Pattern: `foo|BAR|Context\(|kelvin`},
		{Pattern: `(?i:foo)|BAR|ſ`},
		{Pattern: `TODO|x+y`, Context: ptr(1)},
		{Pattern: `(foo)+bar`},
		{Pattern: `TODO`, Include: []string{"*.go"}},
		{Pattern: `TODO`, Include: []string{"d1/**"}, Context: ptr(1)},
		{Pattern: `nil$`, Include: []string{"**/*.txt", "*.md"}},
		{Pattern: `err\r$`},
		{Pattern: `match`, Path: "d1"},
		{Pattern: `long long`, MaxResults: ptr(3)},
		{Pattern: `return`, Path: "d4", Include: []string{"d5/*"}},
	}
	for i, a := range cases {
		name := fmt.Sprintf("%q literal=%v ignore_case=%v include=%v path=%q", a.Pattern, a.Literal, a.IgnoreCase, a.Include, a.Path)
		t.Run(name, func(t *testing.T) {
			want := refGrep(t, dir, a)
			raw, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			runs := 1
			if i < 3 {
				runs = 3 // and check that the output does not vary
			}
			for range runs {
				r := grep{}.Call(context.Background(), env, raw)
				if r.IsError {
					t.Fatal(r.Output)
				}
				if diff := cmp.Diff(bound(want), r.Output); diff != "" {
					t.Fatalf("parallel grep differs from the sequential one (-want +got):\n%s", diff)
				}
			}
			if !strings.Contains(want, ":") {
				t.Logf("no match: %s", want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestGenTreeShape checks that the generated tree has what the parallel
// test relies on.
func TestGenTreeShape(t *testing.T) {
	dir := t.TempDir()
	genTree(t, dir, 3000)
	var files, links int
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			links++
		case d.IsDir():
			dirs = append(dirs, d.Name())
		default:
			files++
		}
		return nil
	})
	if files != 3000 || links == 0 || !slices.Contains(dirs, "node_modules") || !slices.Contains(dirs, "target") || !slices.Contains(dirs, ".git") {
		t.Errorf("files %d links %d dirs %v", files, links, dirs)
	}
}
