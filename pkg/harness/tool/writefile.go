package tool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// writeFile is the write_file tool.
type writeFile struct{ single bool }

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

const writeFileDesc = "Write a whole file: create it, or replace all of its content. " +
	"Missing parent directories are created. The write is atomic, and an existing file keeps its permissions. " +
	"To change part of a file, prefer edit_file."

const writeFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root, with / separators.%s"},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": [%s],
  "additionalProperties": false
}`

// Spec describes write_file.
func (t writeFile) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "write_file", Description: writeFileDesc,
		Parameters: pathSchema(writeFileSchema, t.single, []string{"content"})}
}

// Idempotent reports true: writing the same content twice leaves the file
// as writing it once.
func (writeFile) Idempotent() bool { return true }

// Call writes the file.
func (t writeFile) Call(ctx context.Context, env *Env, args json.RawMessage) Result {
	return invoke(ctx, env, args, t.call)
}

func (writeFile) call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a writeArgs
	if err := decodeArgs(raw, &a, "content"); err != nil {
		return badArgs(err)
	}
	p, refused := filePath(env, a.Path)
	if refused != nil {
		return *refused
	}
	if p == "." {
		return errorf("%s is the workspace root, a directory; give a file path", a.Path)
	}
	if r := gitFloor(env, p); r != nil {
		return *r
	}
	act, stop := authorizePath(ctx, env, Action{Act: policy.Write, Target: p, Content: a.Content})
	if stop != nil {
		return *stop
	}
	p = act.Target
	data := []byte(act.Content)
	created, err := writeAtomic(ctx, env, p, data, 0)
	if err != nil {
		return fsFailure(p, err)
	}
	verb := "wrote"
	if created {
		verb = "created"
	}
	return Result{Output: fmt.Sprintf("%s %s (%s, %s)", verb, p, plural(len(data), "byte"), plural(countLines(data), "line")),
		Changed: []string{p}}
}
