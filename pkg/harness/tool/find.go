package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// Result caps of find.
const (
	findDefaultMax = 200
	findHardMax    = 1000
)

// find is the find tool.
type find struct{}

type findArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	MaxResults *int   `json:"max_results"`
}

const findDesc = "Find files and directories by name with a glob: * matches within one path segment, " +
	"** matches any number of segments, ? one character, [abc] a class, {a,b} alternatives. " +
	"The pattern is matched against each entry's path from the workspace root, its path from the searched directory, and its base name, " +
	"so \"*.go\" and \"**/*.go\" both find every Go file. Results are sorted; directories end with /. " +
	"Directories named .git, target and node_modules are skipped, and symlinks are not followed."

const findSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Glob, for example \"*.go\", \"src/**/*_test.go\" or \"{README,LICENSE}*\"."},
    "path": {"type": "string", "description": "Directory to search, relative to the workspace root. Default \".\", the whole workspace."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Most paths to show. Default 200, at most 1000."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

// Spec describes find.
func (find) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "find", Description: findDesc, Parameters: json.RawMessage(findSchema)}
}

// Idempotent reports true: find changes nothing.
func (find) Idempotent() bool { return true }

// ReadOnly reports that the tool only reads.
func (find) ReadOnly() bool { return true }

// Call finds the paths.
func (t find) Call(ctx context.Context, env *Env, args json.RawMessage) Result {
	return invoke(ctx, env, args, t.call)
}

func (find) call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a findArgs
	if err := decodeArgs(raw, &a, "pattern"); err != nil {
		return badArgs(err)
	}
	limit, err := resultCap(a.MaxResults, findDefaultMax, findHardMax)
	if err != nil {
		return badArgs(err)
	}
	pattern := strings.TrimPrefix(a.Pattern, "./")
	if pattern == "" {
		return badArgs(&argError{Field: "pattern", Msg: "the glob is empty"})
	}
	if !doublestar.ValidatePattern(pattern) {
		return badArgs(&argError{Field: "pattern", Msg: fmt.Sprintf("malformed glob %q: check its brackets [ ], braces { } and escapes", a.Pattern)})
	}
	p, stop := searchPath(ctx, env, a.Path)
	if stop != nil {
		return *stop
	}
	fi, err := env.Root.Stat(p)
	if err != nil {
		return fsFailure(p, err)
	}
	if !fi.IsDir() {
		return errorf("%s is not a directory; find searches directories", p)
	}
	start, err := env.Root.OpenRoot(p)
	if err != nil {
		return fsFailure(p, err)
	}

	workers := walkWorkers()
	found := make([][]string, workers)
	unreadable := walk(ctx, start, p, workers, walkFuncs{
		dir: func(w int, rel string, ents []fs.DirEntry) {
			for _, e := range ents {
				if e.IsDir() && skipDir(e.Name()) {
					continue
				}
				full := path.Join(rel, e.Name())
				if globMatch(pattern, full, p, e.Name()) && peek(env, policy.Read, full).Effect != policy.Deny {
					if e.IsDir() {
						full += "/"
					}
					found[w] = append(found[w], full)
				}
			}
		},
	})
	if err := ctx.Err(); err != nil {
		return errorf("find %q in %s: cancelled: %v", a.Pattern, p, err)
	}
	all := slices.Concat(found...)
	slices.Sort(all)

	var b strings.Builder
	if len(all) == 0 {
		fmt.Fprintf(&b, "no paths match %q in %s", a.Pattern, p)
	}
	for i, f := range all {
		if i == limit || b.Len()+len(f) > maxOutput-outputReserve {
			fmt.Fprintf(&b, "[%d more paths not shown, %d in all; narrow the pattern or the path, or raise max_results (at most %d)]\n",
				len(all)-i, len(all), findHardMax)
			break
		}
		b.WriteString(f)
		b.WriteByte('\n')
	}
	if unreadable > 0 {
		fmt.Fprintf(&b, "[%s could not be read]\n", plural(int(unreadable), "directory"))
	}
	return Result{Output: strings.TrimSuffix(b.String(), "\n")}
}

// globMatch reports whether the glob pattern, already validated, matches
// the entry whose workspace path is full, under the searched directory
// dir, with base name base.
func globMatch(pattern, full, dir, base string) bool {
	if doublestar.MatchUnvalidated(pattern, full) || doublestar.MatchUnvalidated(pattern, base) {
		return true
	}
	if dir == "." {
		return false
	}
	rel, ok := strings.CutPrefix(full, dir+"/")
	return ok && doublestar.MatchUnvalidated(pattern, rel)
}

// resultCap returns the result cap an optional max_results asks for:
// def when absent, at most hard.
func resultCap(v *int, def, hard int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 {
		return 0, &argError{Field: "max_results", Msg: fmt.Sprintf("expected an integer of 1 or more, got %d", *v)}
	}
	return min(*v, hard), nil
}
