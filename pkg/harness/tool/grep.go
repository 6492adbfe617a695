package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// Limits of grep.
const (
	grepDefaultMax = 100
	grepHardMax    = 1000
	grepMaxContext = 10
)

// grep is the grep tool.
type grep struct{}

type grepArgs struct {
	Pattern    string   `json:"pattern"`
	Literal    bool     `json:"literal"`
	IgnoreCase bool     `json:"ignore_case"`
	Path       string   `json:"path"`
	Include    []string `json:"include"`
	Context    *int     `json:"context"`
	MaxResults *int     `json:"max_results"`
}

const grepDesc = "Search file contents, line by line, for a regular expression (Go RE2 syntax) or, with literal, a plain string. " +
	"Output is like ripgrep's: `path:line:text` for a matching line and `path-line-text` for a context line, " +
	"sorted by path then line, with -- between separate groups when context is asked for. Long lines are cut. " +
	"Binary files, symlinks and directories named .git, target and node_modules are skipped. " +
	"At most max_results matching lines are shown; a last line says how many more there are."

const grepSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Go RE2 regular expression, or the exact text when literal is true. Matched within single lines."},
    "literal": {"type": "boolean", "description": "Search for pattern as plain text, not a regular expression. Default false."},
    "ignore_case": {"type": "boolean", "description": "Match without regard to case. Default false."},
    "path": {"type": "string", "description": "File or directory to search, relative to the workspace root. Default \".\", the whole workspace."},
    "include": {"type": "array", "items": {"type": "string"}, "description": "Search only files matching one of these globs (** for any depth), matched against the path from the workspace root, the path from the searched directory, or the base name, for example [\"*.go\"] or [\"src/**/*.ts\"]."},
    "context": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Lines of context to show before and after each match. Default 0, at most 10."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Most matching lines to show. Default 100, at most 1000."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

// Spec describes grep.
func (grep) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "grep", Description: grepDesc, Parameters: json.RawMessage(grepSchema)}
}

// Idempotent reports true: grep changes nothing.
func (grep) Idempotent() bool { return true }

// ReadOnly reports that the tool only reads.
func (grep) ReadOnly() bool { return true }

// Call searches.
func (t grep) Call(ctx context.Context, env *Env, args json.RawMessage) Result {
	return invoke(ctx, env, args, t.call)
}

func (grep) call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a grepArgs
	if err := decodeArgs(raw, &a, "pattern"); err != nil {
		return badArgs(err)
	}
	q, err := newGrepQuery(&a)
	if err != nil {
		return badArgs(err)
	}
	p, stop := searchPath(ctx, env, a.Path)
	if stop != nil {
		return *stop
	}
	q.dir = p
	q.visible = func(rel string) bool { return peek(env, policy.Read, rel).Effect == policy.Allow }
	fi, err := env.Root.Stat(p)
	if err != nil {
		return fsFailure(p, err)
	}

	var col *collector
	var stats *grepStats
	var unreadable int64
	switch {
	case fi.Mode().IsRegular():
		// A file named by path is searched whatever include says.
		col, stats = &collector{max: q.max}, &grepStats{}
		f, err := env.Root.OpenFile(p, searchOpenFlags, 0)
		if err != nil {
			return fsFailure(p, err)
		}
		var w grepWorker
		data, err := readAll(f, &w.buf, stats)
		f.Close()
		if err != nil {
			return fsFailure(p, err)
		}
		if stats.tooBig.Load() == 0 && hasNUL(data) {
			return Result{Output: fmt.Sprintf("%s: binary file, %d bytes, not searched", p, len(data))}
		}
		q.searchData(&w, col, p, data)
	case fi.IsDir():
		start, err := env.Root.OpenRoot(p)
		if err != nil {
			return fsFailure(p, err)
		}
		col, stats, unreadable = q.search(ctx, start)
		if err := ctx.Err(); err != nil {
			return errorf("grep %q in %s: cancelled: %v", a.Pattern, p, err)
		}
	default:
		return errorf("%s is not a regular file or a directory", p)
	}
	return Result{Output: q.render(col, a.Pattern, p, stats, unreadable)}
}

// newGrepQuery validates the arguments of a grep call.
func newGrepQuery(a *grepArgs) (*grepQuery, error) {
	m, err := newMatcher(a.Pattern, a.Literal, a.IgnoreCase)
	if err != nil {
		return nil, err
	}
	q := &grepQuery{m: m, visible: func(string) bool { return true }}
	if q.max, err = resultCap(a.MaxResults, grepDefaultMax, grepHardMax); err != nil {
		return nil, err
	}
	if a.Context != nil {
		if *a.Context < 0 {
			return nil, &argError{Field: "context", Msg: fmt.Sprintf("expected a number of lines from 0 to %d, got %d", grepMaxContext, *a.Context)}
		}
		q.context = min(*a.Context, grepMaxContext)
	}
	for i, g := range a.Include {
		g = strings.TrimPrefix(g, "./")
		if g == "" || !doublestar.ValidatePattern(g) {
			return nil, &argError{Field: fmt.Sprintf("include[%d]", i),
				Msg: fmt.Sprintf("malformed glob %q: check its brackets [ ], braces { } and escapes", a.Include[i])}
		}
		q.include = append(q.include, g)
	}
	return q, nil
}

// render formats the result of a search for pattern in p.
func (q *grepQuery) render(col *collector, pattern, p string, stats *grepStats, unreadable int64) string {
	var b strings.Builder
	shown, stopped := 0, false
	prevPath, prevNum := "", 0
	budget := maxOutput - outputReserve
files:
	for _, f := range col.files {
		last := -1 // the last match shown of this file
		next := nextMatches(f.lines)
		for i, l := range f.lines {
			if l.match {
				if shown == q.max {
					break files
				}
			} else {
				after := last >= 0 && l.num <= last+q.context
				before := next[i] >= 0 && shown < q.max && f.lines[next[i]].num-l.num <= q.context
				if !after && !before {
					continue
				}
			}
			sep := byte('-')
			if l.match {
				sep = ':'
			}
			if b.Len()+len(f.path)+len(l.text)+16 > budget {
				stopped = true
				break files
			}
			if q.context > 0 && prevPath != "" && (f.path != prevPath || l.num != prevNum+1) {
				b.WriteString("--\n")
			}
			fmt.Fprintf(&b, "%s%c%d%c%s\n", f.path, sep, l.num, sep, l.text)
			prevPath, prevNum = f.path, l.num
			if l.match {
				shown++
				last = l.num
			}
		}
	}
	if col.total == 0 {
		fmt.Fprintf(&b, "no matches for %q in %s\n", pattern, p)
	} else if shown < col.total {
		why := ""
		if stopped {
			why = "; the output limit was reached"
		}
		fmt.Fprintf(&b, "[%d more matching lines not shown, %d in %s in all%s; narrow the pattern, path or include, or raise max_results (at most %d)]\n",
			col.total-shown, col.total, plural(col.nfiles, "file"), why, grepHardMax)
	}
	if n := stats.tooBig.Load(); n > 0 {
		fmt.Fprintf(&b, "[%s over 64 MiB not searched]\n", plural(int(n), "file"))
	}
	if n := stats.unreadable.Load(); n > 0 {
		fmt.Fprintf(&b, "[%s could not be read]\n", plural(int(n), "file"))
	}
	if n := stats.withheld.Load(); n > 0 {
		fmt.Fprintf(&b, "[%s not searched: the read policy does not allow them without asking; read_file asks]\n", plural(int(n), "file"))
	}
	if unreadable > 0 {
		fmt.Fprintf(&b, "[%s could not be read]\n", plural(int(unreadable), "directory"))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// nextMatches returns, for each line, the index of the first matching
// line after it, or -1.
func nextMatches(lines []hitLine) []int {
	next := make([]int, len(lines))
	n := -1
	for i := len(lines) - 1; i >= 0; i-- {
		next[i] = n
		if lines[i].match {
			n = i
		}
	}
	return next
}
