package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// maxListEntries is how many entries list_dir shows.
const maxListEntries = 1000

// listDir is the list_dir tool.
type listDir struct{}

type listArgs struct {
	Path string `json:"path"`
}

const listDirDesc = "List a directory of the workspace, one entry a line, sorted by name: " +
	"directories end with /, files show their size in bytes, symlinks show their target. " +
	"Directories named .git, target and node_modules are listed but marked, as grep and find skip them."

const listDirSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory path relative to the workspace root, with / separators. Default \".\", the root."}
  },
  "required": [],
  "additionalProperties": false
}`

// Spec describes list_dir.
func (listDir) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "list_dir", Description: listDirDesc, Parameters: json.RawMessage(listDirSchema)}
}

// Idempotent reports true: list_dir changes nothing.
func (listDir) Idempotent() bool { return true }

// ReadOnly reports that the tool only reads.
func (listDir) ReadOnly() bool { return true }

// Call lists the directory.
func (t listDir) Call(ctx context.Context, env *Env, args json.RawMessage) Result {
	return invoke(ctx, env, args, t.call)
}

func (listDir) call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a listArgs
	if err := decodeArgs(raw, &a); err != nil {
		return badArgs(err)
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
		return errorf("%s is not a directory; use read_file to read a file", p)
	}
	d, err := env.Root.Open(p)
	if err != nil {
		return fsFailure(p, err)
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return fsFailure(p, err)
	}
	// What the read policy denies is not shown at all.
	ents = slices.DeleteFunc(ents, func(e fs.DirEntry) bool {
		return peek(env, policy.Read, path.Join(p, e.Name())).Effect == policy.Deny
	})
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })

	var b strings.Builder
	if len(ents) == 0 {
		fmt.Fprintf(&b, "%s/ (empty directory)", p)
		return Result{Output: b.String()}
	}
	fmt.Fprintf(&b, "%s/ (%s)\n", p, plural(len(ents), "entry"))
	for i, e := range ents {
		if i == maxListEntries || b.Len() > maxOutput-outputReserve {
			fmt.Fprintf(&b, "[%d more entries not shown]\n", len(ents)-i)
			break
		}
		if ctx.Err() != nil {
			return errorf("list_dir %s: cancelled: %v", p, ctx.Err())
		}
		b.WriteString(entryLine(env, p, e))
		b.WriteByte('\n')
	}
	return Result{Output: strings.TrimSuffix(b.String(), "\n")}
}

// entryLine formats one entry of the directory dir.
func entryLine(env *Env, dir string, e fs.DirEntry) string {
	name := e.Name()
	switch t := e.Type(); {
	case t.IsDir():
		if skipDir(name) {
			return name + "/ (skipped by grep and find)"
		}
		return name + "/"
	case t&fs.ModeSymlink != 0:
		target, err := env.Root.Readlink(path.Join(dir, name))
		if err != nil {
			return name + " -> ?"
		}
		return name + " -> " + target
	case t.IsRegular():
		fi, err := e.Info()
		if err != nil {
			return name
		}
		return fmt.Sprintf("%s (%s)", name, plural(int(fi.Size()), "byte"))
	default:
		return fmt.Sprintf("%s (%v)", name, t)
	}
}

// skipDir reports whether grep and find skip directories named name.
func skipDir(name string) bool {
	switch name {
	case ".git", "target", "node_modules":
		return true
	}
	return false
}
