package tool

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// maxGrepFile is the largest file grep searches; larger ones are skipped
// and counted.
const maxGrepFile = 64 << 20

// maxLineShow is how much of a long line grep shows, in bytes.
const maxLineShow = 300

// grepQuery is a validated grep call.
type grepQuery struct {
	m       *matcher
	include []string // globs, validated; empty: every file
	// visible reports whether the read policy allows searching the file
	// at a workspace path without asking anyone.
	visible func(rel string) bool
	dir     string // the searched directory's workspace path
	context int    // lines of context around a match
	max     int    // the most matching lines to show
}

// included reports whether the file at the workspace path rel, with base
// name base, passes the include globs.
func (q *grepQuery) included(rel, base string) bool {
	if len(q.include) == 0 {
		return true
	}
	for _, g := range q.include {
		if globMatch(g, rel, q.dir, base) {
			return true
		}
	}
	return false
}

// fileHits are the matches of one file.
type fileHits struct {
	path  string
	count int // matching lines
	// lines are the matching lines and their context lines, in order,
	// each once. They cover the first max matches and their context; nil
	// when the file cannot be part of the output.
	lines []hitLine
}

// hitLine is one line of grep output.
type hitLine struct {
	num   int
	text  string // clipped to maxLineShow
	match bool
}

// grepStats counts what a search could not search.
type grepStats struct {
	tooBig     atomic.Int64
	unreadable atomic.Int64
	withheld   atomic.Int64 // files the read policy does not allow
}

// collector gathers the fileHits of a parallel search. It keeps only the
// files that can still appear in the output, sorted by path: once the
// files before some path hold max matches, no later path is shown.
type collector struct {
	max int

	mu     sync.Mutex
	files  []fileHits
	kept   int    // matches the kept files can show
	cutoff string // files after it cannot be shown, when cut
	cut    bool
	total  int // matching lines in all files
	nfiles int // files with a matching line
}

// wants reports whether the file at p can still be shown.
func (c *collector) wants(p string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.cut || p < c.cutoff
}

// add records a file's matches.
func (c *collector) add(f fileHits) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += f.count
	c.nfiles++
	if f.lines == nil || (c.cut && f.path > c.cutoff) {
		return
	}
	c.files = append(c.files, f)
	c.kept += min(f.count, c.max)
	if c.kept >= 2*c.max+walkBatch {
		c.prune()
	}
}

// prune sorts the files and drops those that cannot be shown.
func (c *collector) prune() {
	sortHits(c.files)
	acc := 0
	for i, f := range c.files {
		acc += min(f.count, c.max)
		if acc >= c.max {
			clear(c.files[i+1:])
			c.files = c.files[:i+1]
			c.cutoff, c.cut = f.path, true
			break
		}
	}
	c.kept = acc
}

// sortHits sorts files by path.
func sortHits(files []fileHits) {
	slices.SortFunc(files, func(a, b fileHits) int { return strings.Compare(a.path, b.path) })
}

// grepWorker is the scratch space of one search goroutine, reused from
// file to file.
type grepWorker struct {
	buf   []byte
	lower []byte
	hits  []span
}

// search runs q over the tree of the directory start (opened in the
// workspace, at workspace path q.dir), which it closes.
func (q *grepQuery) search(ctx context.Context, start *os.Root) (*collector, *grepStats, int64) {
	workers := walkWorkers()
	scratch := make([]grepWorker, workers)
	col := &collector{max: q.max}
	stats := &grepStats{}
	unreadable := walk(ctx, start, q.dir, workers, walkFuncs{
		file: func(w int, d *dirNode, e fs.DirEntry) {
			name := e.Name()
			rel := path.Join(d.rel, name)
			if !q.included(rel, name) {
				return
			}
			if !q.visible(rel) {
				stats.withheld.Add(1)
				return
			}
			fi, err := e.Info()
			switch {
			case err != nil:
				stats.unreadable.Add(1)
				return
			case !fi.Mode().IsRegular() || fi.Size() == 0:
				return
			case fi.Size() > maxGrepFile:
				stats.tooBig.Add(1)
				return
			}
			f, err := d.root.OpenFile(name, searchOpenFlags, 0)
			if err != nil {
				stats.unreadable.Add(1)
				return
			}
			data, err := readSize(f, int(fi.Size()), &scratch[w].buf)
			f.Close()
			if err != nil {
				stats.unreadable.Add(1)
				return
			}
			q.searchData(&scratch[w], col, rel, data)
		},
	})
	sortHits(col.files)
	return col, stats, unreadable
}

// readAll reads the regular file f into buf, growing it as needed, and
// returns the content, or nil for a file that is not searched.
func readAll(f *os.File, buf *[]byte, stats *grepStats) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil, nil
	}
	if fi.Size() > maxGrepFile {
		stats.tooBig.Add(1)
		return nil, nil
	}
	return readSize(f, int(fi.Size()), buf)
}

// readSize reads the first size bytes of f, the size its last stat gave,
// into buf, growing it as needed. A file that has shrunk since gives what
// it has; one that has grown, its first size bytes.
func readSize(f *os.File, size int, buf *[]byte) ([]byte, error) {
	if cap(*buf) < size {
		*buf = make([]byte, max(size, 64<<10))
	}
	n, err := io.ReadFull(f, (*buf)[:size])
	if err == io.ErrUnexpectedEOF {
		err = nil
	}
	return (*buf)[:n], err
}

// searchData searches the content of the file at rel and records its
// matches in col. A binary file, one with a NUL byte in its head, is
// skipped.
func (q *grepQuery) searchData(w *grepWorker, col *collector, rel string, data []byte) {
	if len(data) == 0 || hasNUL(data) {
		return
	}
	w.hits = q.m.scan(data, &w.lower, w.hits[:0])
	if len(w.hits) == 0 {
		return
	}
	f := fileHits{path: rel, count: len(w.hits)}
	if col.wants(rel) {
		f.lines = q.hitLines(data, w.hits)
	}
	col.add(f)
}

// hitLines returns the lines of data to show for the first q.max of the
// matching lines hits: each with q.context lines before and after it.
func (q *grepQuery) hitLines(data []byte, hits []span) []hitLine {
	n := min(len(hits), q.max)
	lines := make([]hitLine, 0, n*(1+2*q.context))
	nextNum, nextOff := 0, 0 // the line after the last one taken
	h := 0                   // the first hit at or after the line being taken
	for _, hit := range hits[:n] {
		num, off := max(1, hit.num-q.context), hit.start
		if nextNum != 0 && num <= nextNum {
			num, off = nextNum, nextOff
		} else {
			for l := hit.num; l > num; l-- {
				off = bytes.LastIndexByte(data[:off-1], '\n') + 1
			}
		}
		for ; num <= hit.num+q.context && off < len(data); num++ {
			end := len(data)
			if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
				end = off + i
			}
			for h < len(hits) && hits[h].num < num {
				h++
			}
			match := h < len(hits) && hits[h].num == num
			lines = append(lines, hitLine{num: num, text: q.clip(data[off:end], match), match: match})
			off = end + 1
		}
		nextNum, nextOff = num, off
	}
	return lines
}

// clip returns the line as grep shows it: without a final "\r", and, when
// long, cut to about maxLineShow bytes around the match.
func (q *grepQuery) clip(line []byte, match bool) string {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) <= maxLineShow {
		return string(line)
	}
	from := 0
	if match {
		if at := q.m.find(line); at > maxLineShow-100 {
			from = at - 50
		}
	}
	for from > 0 && !utf8.RuneStart(line[from]) {
		from--
	}
	to := min(len(line), from+maxLineShow)
	for to < len(line) && !utf8.RuneStart(line[to]) {
		to--
	}
	var b strings.Builder
	if from > 0 {
		b.WriteString("[… " + plural(from, "byte") + "] ")
	}
	b.Write(line[from:to])
	if to < len(line) {
		b.WriteString(" [… " + plural(len(line)-to, "more byte") + "]")
	}
	return b.String()
}
