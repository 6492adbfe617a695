// Command wordcount counts the lines, words and bytes of text files and
// their most frequent words, and prints the result as JSON. It is the
// tool of the wasm_tool example: built for WASI, it runs in the wasi
// sandbox backend and sees only the workdir it is given.
//
//	wordcount [-top N] [-min-words N] FILE...
//	wordcount -stdin          (arguments as JSON on standard input:
//	                           {"files": [...], "top": N, "min_words": N})
//
// With -min-words it exits 1 when the files hold fewer words in all, so it
// can serve as a verification gate. -stdin is how it runs as a registered
// tool: the harness hands a tool call's arguments to a wasm tool on its
// standard input.
//
// Build it for WASI preview 1 (it also builds and runs on the host):
//
//	GOOS=wasip1 GOARCH=wasm go build -o wordcount.wasm ./examples/wasm_tool/tool
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode"
)

// Stats are the counts of one file, or of all of them.
type Stats struct {
	Path  string      `json:"path,omitempty"`
	Lines int         `json:"lines"`
	Words int         `json:"words"`
	Bytes int64       `json:"bytes"`
	Top   []WordCount `json:"top,omitempty"`
}

// WordCount is how often a word occurs.
type WordCount struct {
	Word  string `json:"word"`
	Count int    `json:"count"`
}

// Report is what wordcount prints.
type Report struct {
	Files []Stats `json:"files"`
	Total Stats   `json:"total"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command, for tests: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, os.Stdin, stdout, stderr)
}

// toolArgs are the arguments of a call as a registered tool.
type toolArgs struct {
	Files    []string `json:"files"`
	Top      *int     `json:"top"`
	MinWords int      `json:"min_words"`
}

func runWith(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	fs.SetOutput(stderr)
	top := fs.Int("top", 5, "report the `N` most frequent words (0: none)")
	minWords := fs.Int("min-words", 0, "exit 1 when the files hold fewer than `N` words in all")
	fromStdin := fs.Bool("stdin", false, "read the arguments as JSON from standard input")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wordcount [-top N] [-min-words N] FILE... | wordcount -stdin")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	files := fs.Args()
	if *fromStdin {
		var a toolArgs
		dec := json.NewDecoder(stdin)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			fmt.Fprintln(stderr, "wordcount: arguments:", err)
			return 2
		}
		files, *minWords = a.Files, a.MinWords
		if a.Top != nil {
			*top = *a.Top
		}
	}
	if len(files) == 0 || *top < 0 || *minWords < 0 {
		fs.Usage()
		return 2
	}
	var rep Report
	all := map[string]int{}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(stderr, "wordcount:", err)
			return 1
		}
		words := map[string]int{}
		st, err := count(f, words)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "wordcount: %s: %v\n", path, err)
			return 1
		}
		st.Path = path
		st.Top = mostFrequent(words, *top)
		rep.Files = append(rep.Files, st)
		rep.Total.Lines += st.Lines
		rep.Total.Words += st.Words
		rep.Total.Bytes += st.Bytes
		for w, n := range words {
			all[w] += n
		}
	}
	rep.Total.Top = mostFrequent(all, *top)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		fmt.Fprintln(stderr, "wordcount:", err)
		return 1
	}
	if rep.Total.Words < *minWords {
		fmt.Fprintf(stderr, "wordcount: %d words, fewer than the %d wanted\n", rep.Total.Words, *minWords)
		return 1
	}
	return 0
}

// count counts r's lines, words and bytes, and adds each word, in lower
// case and without surrounding punctuation, to words. A last line without
// a newline counts as a line.
func count(r io.Reader, words map[string]int) (Stats, error) {
	var st Stats
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		st.Bytes += int64(len(line))
		if len(line) > 0 {
			st.Lines++
		}
		for _, w := range strings.Fields(line) {
			st.Words++
			if w = strings.ToLower(strings.TrimFunc(w, notWordRune)); w != "" {
				words[w]++
			}
		}
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, err
		}
	}
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// mostFrequent returns the n most frequent words, ties in alphabetical
// order.
func mostFrequent(words map[string]int, n int) []WordCount {
	out := make([]WordCount, 0, len(words))
	for w, c := range words {
		out = append(out, WordCount{w, c})
	}
	slices.SortFunc(out, func(a, b WordCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Word, b.Word))
	})
	if len(out) > n {
		out = out[:n]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
