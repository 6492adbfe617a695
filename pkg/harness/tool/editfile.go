package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// maxEditFile is the largest file edit_file edits.
const maxEditFile = 16 << 20

// maxLineList is how many line numbers an observation lists.
const maxLineList = 20

// editFile is the edit_file tool.
type editFile struct{ single bool }

type editArgs struct {
	Path       string `json:"path"`
	OldText    string `json:"old_text"`
	NewText    string `json:"new_text"`
	ReplaceAll bool   `json:"replace_all"`
}

const editFileDesc = "Edit a file by exact search and replace: old_text, copied exactly from the file " +
	"(whitespace and indentation included, without the read_file header line), is replaced by new_text. " +
	"old_text must occur exactly once unless replace_all is true; include enough surrounding lines to make it unique. " +
	"To create a file or replace all of it, use write_file."

const editFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root, with / separators.%s"},
    "old_text": {"type": "string", "description": "The exact text to replace. Must not be empty."},
    "new_text": {"type": "string", "description": "The text to put in its place. May be empty, to delete old_text."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one. Default false."}
  },
  "required": [%s],
  "additionalProperties": false
}`

// Spec describes edit_file.
func (t editFile) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "edit_file", Description: editFileDesc,
		Parameters: pathSchema(editFileSchema, t.single, []string{"old_text", "new_text"})}
}

// Call edits the file. edit_file is not idempotent: once old_text is
// replaced, a repeated call finds it absent, or finds it again in
// new_text.
func (t editFile) Call(ctx context.Context, env *Env, args json.RawMessage) Result {
	return invoke(ctx, env, args, t.call)
}

func (editFile) call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a editArgs
	if err := decodeArgs(raw, &a, "old_text", "new_text"); err != nil {
		return badArgs(err)
	}
	if a.OldText == "" {
		return badArgs(&argError{Field: "old_text", Msg: "old_text is empty; give the exact text to replace " +
			"(to create a file or replace all of it, use write_file)"})
	}
	if a.OldText == a.NewText {
		return badArgs(&argError{Field: "new_text", Msg: "new_text is the same as old_text, so there is nothing to change"})
	}
	p, refused := filePath(env, a.Path)
	if refused != nil {
		return *refused
	}
	if r := gitFloor(env, p); r != nil {
		return *r
	}
	target, err := resolveLinks(env.Root, p)
	if err != nil {
		return fsFailure(p, err)
	}
	// The edit is made on what is read now: another agent's write after
	// this read is a conflict, never overwritten.
	since := mark(env)
	fi, bad := statRegular(env.Root, target, "edit_file")
	if bad != nil {
		return *bad
	}
	if fi.Size() > maxEditFile {
		return errorf("%s has %d bytes, over the %d-byte (16 MiB) limit of edit_file", p, fi.Size(), maxEditFile)
	}
	f, err := env.Root.Open(target)
	if err != nil {
		return fsFailure(p, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEditFile+1))
	f.Close()
	if err != nil {
		return fsFailure(p, err)
	}
	if len(data) > maxEditFile {
		return errorf("%s has grown over the %d-byte (16 MiB) limit of edit_file", p, maxEditFile)
	}
	if isBinary(data) {
		return errorf("%s: binary file, %d bytes; edit_file edits text files only", p, len(data))
	}
	content := string(data)

	n := strings.Count(content, a.OldText)
	switch {
	case n == 0:
		return notFound(p, content, a.OldText)
	case n > 1 && !a.ReplaceAll:
		return errorf("old_text occurs %d times in %s, at lines %s; include more surrounding lines to make it unique, "+
			"or set replace_all to true to replace every occurrence", n, p, lineList(matchLines(content, a.OldText)))
	}
	lines := matchLines(content, a.OldText)
	updated := strings.ReplaceAll(content, a.OldText, a.NewText)
	act, stop := authorizePath(ctx, env, Action{Act: policy.Write, Target: p, Content: updated})
	if stop != nil {
		return *stop
	}
	if act.Target != p {
		// An approver moved the write: write where it says.
		p = act.Target
		if target, err = resolveLinks(env.Root, p); err != nil {
			return fsFailure(p, err)
		}
	}
	if _, err := writeAtomic(ctx, env, target, []byte(act.Content), since); err != nil {
		return fsFailure(p, err)
	}
	if n == 1 {
		return Result{Output: fmt.Sprintf("edited %s: replaced 1 occurrence, at line %d", p, lines[0]), Changed: []string{p}}
	}
	return Result{Output: fmt.Sprintf("edited %s: replaced %d occurrences, at lines %s", p, n, lineList(lines)), Changed: []string{p}}
}

// notFound returns the observation for an old_text absent from content,
// with a hint when it occurs with different whitespace.
func notFound(p, content, old string) Result {
	msg := fmt.Sprintf("old_text was not found in %s", p)
	needle := strings.TrimSpace(squeezeSpace(old))
	if needle == "" {
		return errorf("%s; it holds only whitespace", msg)
	}
	hay := squeezeSpace(content)
	i := strings.Index(hay, needle)
	if i < 0 {
		return errorf("%s; read the file again and copy the text exactly", msg)
	}
	from := origOffset(content, i)
	to := origOffset(content, i+len(needle)-1)
	first := 1 + strings.Count(content[:from], "\n")
	last := first + strings.Count(content[from:to], "\n")
	where := fmt.Sprintf("line %d", first)
	if last != first {
		where = fmt.Sprintf("lines %d-%d", first, last)
	}
	return errorf("%s exactly, but text that differs from it only in whitespace (spaces, tabs, line breaks) is at %s; "+
		"read those lines with read_file and copy them exactly, indentation included", msg, where)
}

// isSpace reports whether c is an ASCII whitespace byte.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// squeezeSpace replaces every run of ASCII whitespace in s with one space.
func squeezeSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if !isSpace(s[i]) {
			b.WriteByte(s[i])
			continue
		}
		b.WriteByte(' ')
		for i+1 < len(s) && isSpace(s[i+1]) {
			i++
		}
	}
	return b.String()
}

// origOffset returns the offset in s of the byte at offset k of
// squeezeSpace(s).
func origOffset(s string, k int) int {
	j := 0
	for i := 0; i < len(s); i++ {
		if j == k {
			return i
		}
		if isSpace(s[i]) {
			for i+1 < len(s) && isSpace(s[i+1]) {
				i++
			}
		}
		j++
	}
	return len(s)
}

// matchLines returns the line numbers, from 1, at which the occurrences
// of old in content start.
func matchLines(content, old string) []int {
	var lines []int
	line, pos := 1, 0
	for {
		i := strings.Index(content[pos:], old)
		if i < 0 {
			return lines
		}
		line += strings.Count(content[pos:pos+i], "\n")
		lines = append(lines, line)
		line += strings.Count(old, "\n")
		pos += i + len(old)
	}
}

// lineList formats line numbers, eliding all after the first maxLineList.
func lineList(lines []int) string {
	var b strings.Builder
	for i, l := range lines {
		if i == maxLineList {
			fmt.Fprintf(&b, " and %d more", len(lines)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(l))
	}
	return b.String()
}
