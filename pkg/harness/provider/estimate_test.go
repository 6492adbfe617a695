package provider_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// judge counts tokens as the vendors' public tokenizers do: the larger of
// cl100k_base's and o200k_base's count of a text as a request carries it,
// each invalid UTF-8 byte replaced by U+FFFD as encoding/json does.
type judge []tokenizer.Codec

func newJudge(t testing.TB) judge {
	t.Helper()
	var j judge
	for _, e := range []tokenizer.Encoding{tokenizer.Cl100kBase, tokenizer.O200kBase} {
		c, err := tokenizer.Get(e)
		if err != nil {
			t.Fatal(err)
		}
		j = append(j, c)
	}
	return j
}

func (j judge) count(t testing.TB, s string) int64 {
	s = string([]rune(s))
	var most int
	for _, c := range j {
		n, err := c.Count(s)
		if err != nil {
			t.Fatalf("%s: %v", c.GetName(), err)
		}
		most = max(most, n)
	}
	return int64(most)
}

// text is one text of the corpus; kind groups texts for the report.
type text struct{ kind, name, s string }

// sourceBudget bounds the bytes of the module's own files the corpus
// takes whole, and excerpt the bytes it takes from each of the others:
// the reference tokenizers run at a fraction of a megabyte a second under
// the race detector.
const (
	sourceBudget = 128 << 10
	excerpt      = 384
)

// corpus is what CountTextTokens is measured on: the module's own
// sources (every k-th file in path order whole, within sourceBudget, and
// an excerpt from the middle of each of the others), texts a
// tool prints (JSON, logs, CSV, hashes, base64), random bytes, prose in
// eleven languages, random CJK and emoji.
func corpus(t testing.TB) []text {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root: %v", err)
	}
	var files []text
	total := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".py", ".js", ".ts", ".json", ".c", ".h", ".rs", ".toml", ".sum", ".mod", ".sh", ".yaml", ".yml", ".txt", ".html", ".css":
		default:
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || !utf8.Valid(data) {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, text{"source", rel, string(data)})
		total += len(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("only %d source files under %s", len(files), root)
	}
	var texts []text
	step, taken := (total+sourceBudget-1)/sourceBudget, 0
	for i, f := range files {
		if i%step == 0 && taken < sourceBudget {
			texts = append(texts, f)
			taken += len(f.s)
			continue
		}
		mid := f.s[len(f.s)/2:]
		if nl := strings.IndexByte(mid, '\n'); nl >= 0 {
			mid = mid[nl+1:]
		}
		if len(mid) > excerpt {
			mid = mid[:excerpt]
			for !utf8.ValidString(mid) {
				mid = mid[:len(mid)-1]
			}
		}
		if mid != "" {
			texts = append(texts, text{"source excerpt", f.name + " (excerpt)", mid})
		}
	}

	prose, err := os.ReadFile("testdata/prose.txt")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range strings.Split(string(prose), "\n\n") {
		texts = append(texts, text{"prose", fmt.Sprintf("prose.txt paragraph %d", i+1), p})
	}

	rng := rand.New(rand.NewPCG(22, 4))
	gen := func(kind, name string, n int, piece func(*strings.Builder)) {
		var b strings.Builder
		for b.Len() < n {
			piece(&b)
		}
		texts = append(texts, text{kind, name, b.String()})
	}
	raw := make([]byte, 3000)
	for i := range raw {
		raw[i] = byte(rng.IntN(256))
	}
	texts = append(texts, text{"random", "random bytes", string(raw)},
		text{"tool output", "base64", base64.StdEncoding.EncodeToString(raw)},
		text{"tool output", "hex", hex.EncodeToString(raw)})
	gen("random", "random printable ASCII", 4000, func(b *strings.Builder) { b.WriteByte(byte(0x20 + rng.IntN(95))) })
	gen("random", "random ASCII", 4000, func(b *strings.Builder) { b.WriteByte(byte(rng.IntN(128))) })
	gen("random", "random lower-case letters", 4000, func(b *strings.Builder) { b.WriteByte(byte('a' + rng.IntN(26))) })
	gen("random", "random punctuation", 2000, func(b *strings.Builder) {
		b.WriteByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"[rng.IntN(32)])
	})
	gen("random", "control characters", 3000, func(b *strings.Builder) { b.WriteByte(byte(rng.IntN(32))) })
	gen("random", "NUL bytes", 3000, func(b *strings.Builder) { b.WriteByte(0) })
	gen("random", "digits", 2000, func(b *strings.Builder) { b.WriteByte(byte('0' + rng.IntN(10))) })
	gen("random", "whitespace and a few characters", 2000, func(b *strings.Builder) {
		b.WriteString([]string{"\n", "\n\n", " ", "  ", "\t", "\r\n", "x", "1", "é", "日"}[rng.IntN(10)])
	})
	gen("tool output", "UUIDs", 3600, func(b *strings.Builder) {
		fmt.Fprintf(b, "%08x-%04x-%04x-%04x-%012x\n", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
	})
	gen("tool output", "log lines", 12000, func(b *strings.Builder) {
		fmt.Fprintf(b, "2024-%02d-%02dT%02d:%02d:%02d.%06dZ INFO request id=%d latency=%dms path=/v1/items/%d\n",
			1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e6), rng.Int64(), rng.IntN(5000), rng.IntN(1e5))
	})
	gen("tool output", "CSV of numbers", 8000, func(b *strings.Builder) {
		fmt.Fprintf(b, "%d,%.6f,%d,%x\n", rng.IntN(1e9), rng.Float64()*1e4, -rng.IntN(1e5), rng.Uint64())
	})
	gen("tool output", "indentation and rules", 4000, func(b *strings.Builder) {
		b.WriteString(strings.Repeat(" ", rng.IntN(40)) + strings.Repeat("\t", rng.IntN(6)) + strings.Repeat("=-*#."[rng.IntN(5):][:1], rng.IntN(60)) + "\n")
	})
	var items []map[string]any
	for range 40 {
		items = append(items, map[string]any{"id": rng.Int64(), "name": fmt.Sprintf("item-%d", rng.IntN(1e6)), "score": rng.Float64(),
			"tags": []string{"alpha", "beta", "日本"}, "ok": rng.IntN(2) == 0, "nested": map[string]any{"x": rng.IntN(100), "y": nil}})
	}
	compact, _ := json.Marshal(items)
	indented, _ := json.MarshalIndent(items, "", "  ")
	texts = append(texts, text{"JSON", "JSON", string(compact)}, text{"JSON", "indented JSON", string(indented)})
	gen("non-ASCII", "random CJK", 4500, func(b *strings.Builder) { b.WriteRune(rune(0x4E00 + rng.IntN(0x9FFF-0x4E00))) })
	gen("non-ASCII", "random characters of the BMP", 3000, func(b *strings.Builder) { b.WriteRune(rune(0x80 + rng.IntN(0xD800-0x80))) })
	gen("non-ASCII", "random emoji", 4000, func(b *strings.Builder) { b.WriteRune(rune(0x1F300 + rng.IntN(0x1FAFF-0x1F300))) })
	emoji := []string{"😀", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵", "🏳️‍🌈", "❤️", "🤖", "🚀", "🧑🏿‍💻", "✨", "🎉", "🙏🏻"}
	gen("non-ASCII", "emoji sequences", 3600, func(b *strings.Builder) {
		b.WriteString(emoji[rng.IntN(len(emoji))])
		if rng.IntN(3) == 0 {
			b.WriteByte(' ')
		}
	})
	return texts
}

// pieceSize is the length of the pieces each text is also judged in: a
// message is often a part of a text.
const pieceSize = 512

// pieces cuts s into pieces of at most n bytes, at character boundaries.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// judged is a text or a piece of one, with the judge's count.
type judged struct {
	kind, name, s string
	real          int64
	piece         bool
}

// judgeAll counts every text of the corpus and every piece of each with
// the judge.
func judgeAll(t testing.TB, texts []text) []judged {
	j := newJudge(t)
	var out []judged
	for _, x := range texts {
		out = append(out, judged{x.kind, x.name, x.s, j.count(t, x.s), false})
		if len(x.s) <= pieceSize {
			continue
		}
		for i, p := range pieces(x.s, pieceSize) {
			out = append(out, judged{x.kind, fmt.Sprintf("%s, piece %d", x.name, i+1), p, j.count(t, p), true})
		}
	}
	return out
}

// under returns the texts and pieces that count makes fewer tokens of
// than the judge.
func under(all []judged, count func(string) int64) []judged {
	var out []judged
	for _, x := range all {
		if count(x.s) < x.real {
			out = append(out, x)
		}
	}
	return out
}

// CountTextTokens never counts fewer tokens than cl100k_base and
// o200k_base make of a text, whole or in 512-byte pieces, over the
// corpus; it never counts more than the text's bytes, and over-counts
// source code by less than 3.5 times. The negative control is the rule it
// replaced, a token per four bytes, which the same judge catches
// under-counting most of the corpus.
func TestCountTextTokensBound(t *testing.T) {
	texts := corpus(t)
	all := judgeAll(t, texts)
	bad := under(all, provider.CountTextTokens)
	for i, x := range bad {
		if i == 10 {
			t.Errorf("... and %d more", len(bad)-10)
			break
		}
		t.Errorf("%s: counted %d tokens, the tokenizers make %d of its %d bytes", x.name, provider.CountTextTokens(x.s), x.real, len(x.s))
	}
	type sum struct{ texts, bytes, got, real int64 }
	sums := map[string]*sum{}
	var kinds []string
	for _, x := range all {
		got := provider.CountTextTokens(x.s)
		if carried := len(string([]rune(x.s))); got > int64(carried) {
			t.Errorf("%s: counted %d tokens in %d bytes", x.name, got, carried)
		}
		if x.piece {
			continue
		}
		if sums[x.kind] == nil {
			sums[x.kind] = &sum{}
			kinds = append(kinds, x.kind)
		}
		s := sums[x.kind]
		s.texts, s.bytes, s.got, s.real = s.texts+1, s.bytes+int64(len(x.s)), s.got+got, s.real+x.real
	}
	slices.Sort(kinds)
	var code sum
	for _, k := range kinds {
		s := sums[k]
		t.Logf("%-14s %3d texts, %7d bytes: counted %6d tokens, the tokenizers %6d: %.2f times", k, s.texts, s.bytes, s.got, s.real, float64(s.got)/float64(s.real))
		if strings.HasPrefix(k, "source") {
			code.got, code.real = code.got+s.got, code.real+s.real
		}
	}
	if over := float64(code.got) / float64(code.real); over >= 3.5 {
		t.Errorf("the module's sources are counted %.2f times over; the doc comment says about three", over)
	}
	t.Logf("%d texts and %d pieces of at most %d bytes judged", len(texts), len(all)-len(texts), pieceSize)

	// The negative control: the former estimate, judged the same way.
	quarter := func(s string) int64 { return int64((len(s) + 3) / 4) }
	if n := len(under(all, quarter)); n < len(all)/2 {
		t.Errorf("negative control: bytes ÷ 4 under-counts only %d of %d texts and pieces; the corpus does not catch an under-count", n, len(all))
	} else {
		t.Logf("negative control: bytes ÷ 4 under-counts %d of %d texts and pieces", n, len(all))
	}
}

// Counting allocates nothing.
func TestCountTextTokensAllocates(t *testing.T) {
	s := strings.Repeat("func main() { fmt.Println(\"héllo, 世界 🚀\") }\n\x00\xff", 100)
	if n := testing.AllocsPerRun(100, func() { provider.CountTextTokens(s) }); n != 0 {
		t.Errorf("%v allocations a count", n)
	}
}

// The estimate of a request counts every text in it and the framing of
// each message and tool.
func TestEstimateInput(t *testing.T) {
	c := provider.CountTextTokens
	req := &provider.Request{System: "be brief",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "list the files"},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "list_dir", Arguments: json.RawMessage(`{"path":"."}`)}}},
			{Role: provider.RoleTool, ToolCallID: "call_1", Content: "a.go\nb.go\n"}},
		Tools: []provider.ToolSpec{{Name: "list_dir", Description: "List a directory.", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	want := c("be brief") + c("list the files") + c("call_1") + c("list_dir") + c(`{"path":"."}`) + c("call_1") + c("a.go\nb.go\n") +
		c("list_dir") + c("List a directory.") + c(`{"type":"object"}`) + 4*provider.PerMessageTokens
	if got := provider.EstimateInput(req); got != want {
		t.Errorf("EstimateInput = %d, want %d", got, want)
	}
}

// BenchmarkCountTextTokens counts this package's sources with the
// estimate and with the rule it replaced, a token per four bytes.
func BenchmarkCountTextTokens(b *testing.B) {
	var src strings.Builder
	paths, _ := filepath.Glob("*.go")
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		src.Write(data)
	}
	s := src.String()
	var sink int64
	b.Run("conservative", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			sink += provider.CountTextTokens(s)
		}
	})
	b.Run("bytes÷4", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			sink += int64((len(s) + 3) / 4)
		}
	})
	_ = sink
}

// The facts about the vocabularies CountTextTokens rests on hold for both
// cl100k_base and o200k_base: every string of one to three ASCII digits
// and every space followed by an ASCII letter is one token, and the
// letter pairs that are one token are exactly those of its table.
func TestVocabularyFacts(t *testing.T) {
	j := newJudge(t)
	one := func(s string) bool { return j.count(t, s) == 1 && j.least(t, s) == 1 }
	for n := range 1000 {
		for _, s := range []string{fmt.Sprint(n), fmt.Sprintf("%02d", n%100), fmt.Sprintf("%03d", n)} {
			if !one(s) {
				t.Errorf("%q is not one token", s)
			}
		}
	}
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var want [52]uint64
	for a := range letters {
		if !one(" " + letters[a:a+1]) {
			t.Errorf("%q is not one token", " "+letters[a:a+1])
		}
		for b := range letters {
			if one(letters[a:a+1] + letters[b:b+1]) {
				want[a] |= 1 << b
			}
		}
	}
	if got := provider.PairTokens(); got != want {
		var b strings.Builder
		for a, m := range want {
			fmt.Fprintf(&b, "\t%#x, // %c\n", m, letters[a])
		}
		t.Errorf("pairTokens is not the tokenizers' table; it should read:\n%s", b.String())
	}
}

// least is the smaller of the two tokenizers' counts.
func (j judge) least(t testing.TB, s string) int64 {
	least := int64(math.MaxInt64)
	for _, c := range j {
		n, err := c.Count(s)
		if err != nil {
			t.Fatal(err)
		}
		least = min(least, int64(n))
	}
	return least
}

// adversarial returns the texts an outside attack used against the
// estimate, and seeded random texts of the classes a bound must hold
// over: control characters and white space, letters (rare pairs
// especially), digits, punctuation, mixed scripts, emoji and invalid
// UTF-8, alone and mixed.
func adversarial(seed uint64, cases int) []text {
	rng := rand.New(rand.NewPCG(seed, 22))
	pick := func(set string, n int) string {
		r := []rune(set)
		var b strings.Builder
		for range n {
			b.WriteRune(r[rng.IntN(len(r))])
		}
		return b.String()
	}
	words := func(set string, wl, n int, sep string) string {
		var p []string
		for range n {
			p = append(p, pick(set, wl))
		}
		return strings.Join(p, sep)
	}
	const lower = "abcdefghijklmnopqrstuvwxyz"
	out := []text{
		{"attack", "CR runs", strings.Repeat("\r", 4000)},
		{"attack", "tab CR", strings.Repeat("\t\r", 2000)},
		{"attack", "CR space", strings.Repeat("\r ", 2000)},
		{"attack", "random lower-case 8-letter words", words(lower, 8, 500, " ")},
		{"attack", "lower-case words joined by digits", words(lower, 8, 500, "1")},
		{"attack", "white space mix", pick(" \t\r\n", 4000)},
		{"attack", "letters and punctuation", pick(lower+"!#$%&*+-/:;<=>?@^_|~", 4000)},
		{"attack", "consonants", words("bcdfghjklmnpqrstvwxz", 8, 500, " ")},
		{"attack", "rare letters", words("jqxzJQXZvkwfgy", 6, 600, " ")},
		{"attack", "vertical tab, form feed, NUL", pick("\v\f\x00\x1b\x7f", 3000)},
	}
	classes := []string{
		" \t\r\n\v\f\x00\x01\x1f\x7f\u00a0\u2028\u3000\u200b\ufeff",
		lower, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "jqxzvkwfgyJQXZVKWFGY", "0123456789",
		"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "日本語中文한국어русскийελληνικάעבריתالعربيةहिन्दी",
		"😀👍🏽👨‍👩‍👧‍👦🇯🇵🏳️‍🌈❤️🤖🚀✨", "\xff\xfe\xc3\x28\xe2\x82\xf0\x9f\x80",
		"²³½Ⅻ٣४", "'sdtmlrev ",
	}
	for c := range cases {
		var b strings.Builder
		n := 1 + rng.IntN(600)
		mix := 1 + rng.IntN(4)
		set := ""
		for range mix {
			set += classes[rng.IntN(len(classes))]
		}
		for b.Len() < n {
			if rng.IntN(8) == 0 {
				b.WriteString(classes[rng.IntN(len(classes))][:1])
			}
			b.WriteString(pick(set, 1+rng.IntN(12)))
		}
		out = append(out, text{"random", fmt.Sprintf("case %d of seed %d", c, seed), b.String()})
	}
	return out
}

// CountTextTokens holds over the attack's texts and seeded random texts
// of every class. The negative control is the real count with its
// letter-pair check switched off, as if every two letters were a token:
// the same texts catch it under-counting.
func TestCountTextTokensAdversarial(t *testing.T) {
	texts := adversarial(22, 400)
	all := judgeAll(t, texts)
	bad := under(all, provider.CountTextTokens)
	for i, x := range bad {
		if i == 10 {
			t.Errorf("... and %d more", len(bad)-10)
			break
		}
		t.Errorf("%s: counted %d tokens, the tokenizers make %d of %q", x.name, provider.CountTextTokens(x.s), x.real, x.s)
	}
	var got, real int64
	for _, x := range all {
		if !x.piece {
			got, real = got+provider.CountTextTokens(x.s), real+x.real
		}
	}
	t.Logf("%d texts and %d pieces: counted %d tokens, the tokenizers %d: %.2f times", len(texts), len(all)-len(texts), got, real, float64(got)/float64(real))

	restore := provider.TrustEveryLetterPair()
	n := len(under(all, provider.CountTextTokens))
	restore()
	if n == 0 {
		t.Error("negative control: trusting every letter pair under-counts nothing; the texts do not test the pair check")
	} else {
		t.Logf("negative control: trusting every letter pair under-counts %d of %d texts and pieces", n, len(all))
	}
}

// FuzzCountTextTokens checks the bound on any text.
func FuzzCountTextTokens(f *testing.F) {
	for _, x := range adversarial(4, 20) {
		f.Add(x.s)
	}
	j := newJudge(f)
	f.Fuzz(func(t *testing.T, s string) {
		if real := j.count(t, s); provider.CountTextTokens(s) < real {
			t.Errorf("counted %d tokens, the tokenizers make %d of %q", provider.CountTextTokens(s), real, s)
		}
	})
}
