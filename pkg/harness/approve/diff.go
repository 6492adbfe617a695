package approve

import (
	"fmt"
	"strings"
)

// maxDiffLines bounds the lines Diff compares; beyond it the diff is the
// whole old and new text.
const maxDiffLines = 20000

// Diff returns a unified diff of old and new, with three lines of context,
// headed by name. It is what a person is shown for a proposed write.
func Diff(name, old, new string) string {
	if old == new {
		return fmt.Sprintf("--- %s\n+++ %s\n(no change)\n", name, name)
	}
	a, b := splitLines(old), splitLines(new)
	var ops []op
	if len(a)+len(b) > maxDiffLines {
		ops = replaceAll(a, b)
	} else {
		ops = myers(a, b)
	}
	var w strings.Builder
	from := "a/" + name
	if old == "" {
		from = "/dev/null"
	}
	fmt.Fprintf(&w, "--- %s\n+++ b/%s\n", from, name)
	writeHunks(&w, ops, 3)
	return w.String()
}

type opKind byte

const (
	keep opKind = ' '
	del  opKind = '-'
	add  opKind = '+'
)

type op struct {
	kind  opKind
	line  string
	aLine int // 0-based line in a (keep, del)
	bLine int // 0-based line in b (keep, add)
}

// splitLines splits s into lines that keep their "\n"; a last line
// without one is marked so the diff shows it.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n\\ No newline at end of file\n"
	}
	return lines
}

func replaceAll(a, b []string) []op {
	var ops []op
	for i, l := range a {
		ops = append(ops, op{kind: del, line: l, aLine: i})
	}
	for j, l := range b {
		ops = append(ops, op{kind: add, line: l, bLine: j})
	}
	return ops
}

// myers computes a shortest edit script with Myers' O(ND) algorithm.
func myers(a, b []string) []op {
	n, m := len(a), len(b)
	max := n + m
	v := make([]int, 2*max+2)
	var trace [][]int
	for d := 0; d <= max; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[max+k-1] < v[max+k+1]) {
				x = v[max+k+1]
			} else {
				x = v[max+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[max+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace, d, max)
			}
		}
	}
	return replaceAll(a, b)
}

func backtrack(a, b []string, trace [][]int, d, max int) []op {
	x, y := len(a), len(b)
	var rev []op
	for ; d >= 0; d-- {
		v := trace[d]
		k := x - y
		var prevK int
		if k == -d || (k != d && v[max+k-1] < v[max+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := v[max+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x, y = x-1, y-1
			rev = append(rev, op{kind: keep, line: a[x], aLine: x, bLine: y})
		}
		if d > 0 {
			if x == prevX {
				y--
				rev = append(rev, op{kind: add, line: b[y], bLine: y})
			} else {
				x--
				rev = append(rev, op{kind: del, line: a[x], aLine: x})
			}
		}
	}
	ops := make([]op, len(rev))
	for i := range rev {
		ops[i] = rev[len(rev)-1-i]
	}
	return ops
}

// writeHunks writes the changes of ops with ctx lines of context.
func writeHunks(w *strings.Builder, ops []op, ctx int) {
	for i := 0; i < len(ops); {
		if ops[i].kind == keep {
			i++
			continue
		}
		start := max(0, i-ctx)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != keep {
				end = j
				continue
			}
			if j-end > 2*ctx {
				break
			}
		}
		end = min(len(ops), end+ctx+1)
		aStart, bStart, aLen, bLen := -1, -1, 0, 0
		for _, o := range ops[start:end] {
			if o.kind != add {
				if aStart < 0 {
					aStart = o.aLine
				}
				aLen++
			}
			if o.kind != del {
				if bStart < 0 {
					bStart = o.bLine
				}
				bLen++
			}
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, o := range ops[start:end] {
			w.WriteByte(byte(o.kind))
			w.WriteString(o.line)
		}
		i = end
	}
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", max(start, 0))
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
