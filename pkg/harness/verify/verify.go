// Package verify holds the verification gates: the checks the harness runs
// after every step to decide whether a run has succeeded. The model never
// declares success; a gate does.
//
// A [Check] is plain data with a JSON form. [Check.Validate] runs when the
// task contract is built, so a bad check is a configuration error that
// names its field; [Run] evaluates a validated check against the workspace.
package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Kind names a verification gate.
type Kind string

const (
	// FileContains passes when the file contains Text. In a single-file
	// task File defaults to the task's file.
	FileContains Kind = "file_contains"
	// FileEquals passes when the file's content is exactly Content. In a
	// single-file task File defaults to the task's file.
	FileEquals Kind = "file_equals"
	// WorkspaceFileContains passes when the workspace file File contains
	// Text. File is required.
	WorkspaceFileContains Kind = "workspace_file_contains"
	// JSONSchema passes when File holds JSON that validates against
	// Schema (JSON Schema draft 2020-12 unless the schema says otherwise).
	JSONSchema Kind = "json_schema"
)

// Check is one verification gate.
type Check struct {
	Kind Kind `json:"kind"`
	// File is the slash-separated workspace-relative path the gate reads.
	File string `json:"file,omitempty"`
	// Text is the substring FileContains and WorkspaceFileContains want.
	Text string `json:"text,omitempty"`
	// Content is the exact content FileEquals wants. A pointer, so that
	// an empty file can be asked for.
	Content *string `json:"content,omitempty"`
	// Schema is the JSON Schema document JSONSchema validates against.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// FieldError is a check that is not valid. Field is the JSON name of the
// offending field.
type FieldError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Validate checks c and fills its defaults. defaultFile is the task's file
// in a single-file task and "" in a workspace task.
func (c *Check) Validate(defaultFile string) error {
	switch c.Kind {
	case FileContains, FileEquals, JSONSchema:
		if c.File == "" {
			c.File = defaultFile
		}
	case WorkspaceFileContains:
	case "":
		return &FieldError{"kind", "required; one of file_contains, file_equals, workspace_file_contains, json_schema"}
	default:
		return &FieldError{"kind", fmt.Sprintf("unknown kind %q; want file_contains, file_equals, workspace_file_contains or json_schema", c.Kind)}
	}
	if c.File == "" {
		return &FieldError{"file", "required"}
	}
	if err := cleanFile(c.File); err != nil {
		return &FieldError{"file", err.Error()}
	}
	c.File = path.Clean(strings.ReplaceAll(c.File, `\`, "/"))
	switch c.Kind {
	case FileContains, WorkspaceFileContains:
		if c.Text == "" {
			return &FieldError{"text", "required: an empty needle is in every file"}
		}
	case FileEquals:
		if c.Content == nil {
			return &FieldError{"content", "required"}
		}
	case JSONSchema:
		if len(c.Schema) == 0 {
			return &FieldError{"schema", "required"}
		}
		if _, err := compileSchema(c.Schema); err != nil {
			return &FieldError{"schema", err.Error()}
		}
		c.Schema = json.RawMessage(compact(c.Schema))
	}
	return nil
}

// cleanFile refuses paths that cannot name a file inside the workspace.
func cleanFile(p string) error {
	s := strings.ReplaceAll(p, `\`, "/")
	switch {
	case strings.ContainsRune(s, 0):
		return errors.New("contains a NUL byte")
	case strings.HasPrefix(s, "/") || (len(s) >= 2 && s[1] == ':'):
		return errors.New("must be relative to the workspace root")
	}
	c := path.Clean(s)
	if c == "." {
		return errors.New("names the workspace root, not a file")
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return errors.New("climbs out of the workspace with ..")
	}
	return nil
}

// Describe says what the check wants, in words the model reads.
func (c *Check) Describe() string {
	switch c.Kind {
	case FileContains, WorkspaceFileContains:
		return fmt.Sprintf("%s must contain %s", c.File, quote(c.Text))
	case FileEquals:
		return fmt.Sprintf("%s must be exactly %s", c.File, quote(*c.Content))
	case JSONSchema:
		return fmt.Sprintf("%s must hold JSON valid against this schema: %s", c.File, compact(c.Schema))
	}
	return string(c.Kind)
}

// Result is what one check found.
type Result struct {
	Kind   Kind   `json:"kind"`
	File   string `json:"file,omitempty"`
	Passed bool   `json:"passed"`
	// Detail says why the check failed, or what passed.
	Detail   string        `json:"detail"`
	Duration time.Duration `json:"duration"`
}

// Run evaluates a validated check against the workspace root. A check
// that cannot read its file fails with the reason; Run never returns a Go
// error, because a failed check is data for the model.
func Run(ctx context.Context, root *os.Root, c *Check) Result {
	start := time.Now()
	r := run(ctx, root, c)
	r.Kind, r.File, r.Duration = c.Kind, c.File, time.Since(start)
	return r
}

// maxFile bounds what a content gate reads.
const maxFile = 64 << 20

func run(ctx context.Context, root *os.Root, c *Check) Result {
	if err := ctx.Err(); err != nil {
		return Result{Detail: "not run: " + err.Error()}
	}
	data, err := readFile(root, c.File)
	if err != nil {
		return Result{Detail: err.Error()}
	}
	switch c.Kind {
	case FileContains, WorkspaceFileContains:
		if bytes.Contains(data, []byte(c.Text)) {
			return Result{Passed: true, Detail: fmt.Sprintf("%s contains %s", c.File, quote(c.Text))}
		}
		return Result{Detail: fmt.Sprintf("%s does not contain %s", c.File, quote(c.Text))}
	case FileEquals:
		if string(data) == *c.Content {
			return Result{Passed: true, Detail: fmt.Sprintf("%s has the expected content", c.File)}
		}
		return Result{Detail: fmt.Sprintf("%s differs from the expected content: %s", c.File, firstDifference(string(data), *c.Content))}
	case JSONSchema:
		sch, err := compileSchema(c.Schema)
		if err != nil {
			return Result{Detail: "schema does not compile: " + err.Error()}
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return Result{Detail: fmt.Sprintf("%s is not valid JSON: %v", c.File, err)}
		}
		if err := sch.Validate(doc); err != nil {
			return Result{Detail: fmt.Sprintf("%s does not match the schema: %s", c.File, schemaFailure(err))}
		}
		return Result{Passed: true, Detail: fmt.Sprintf("%s matches the schema", c.File)}
	}
	return Result{Detail: fmt.Sprintf("unknown check kind %q", c.Kind)}
}

func readFile(root *os.Root, name string) ([]byte, error) {
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %v", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %v", name, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", name)
	}
	if fi.Size() > maxFile {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit of a content check", name, fi.Size(), maxFile)
	}
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+1))
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("%s cannot be read: %v", name, err)
	}
	return buf.Bytes(), nil
}

// compileSchema compiles an inline schema. References to anything outside
// the document itself are refused: a gate never reads the network or the
// host's files.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	const loc = "inline.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema %q refused: a schema must be self-contained", url)
}

// schemaFailure flattens the validator's report to one bounded line.
func schemaFailure(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	if len(lines) > 6 {
		lines = append(lines[:6], fmt.Sprintf("(%d more lines)", len(lines)-6))
	}
	return strings.Join(lines, "; ")
}

// firstDifference locates where got first departs from want.
func firstDifference(got, want string) string {
	line, i := 1, 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		if got[i] == '\n' {
			line++
		}
		i++
	}
	switch {
	case i == len(got) && i == len(want):
		return "identical"
	case i == len(got):
		return fmt.Sprintf("it ends at line %d where more is expected (%d of %d bytes present)", line, len(got), len(want))
	case i == len(want):
		return fmt.Sprintf("it has %d extra bytes after line %d", len(got)-len(want), line)
	}
	return fmt.Sprintf("first difference at line %d: got %s, want %s", line, quote(snippet(got[i:])), quote(snippet(want[i:])))
}

func snippet(s string) string {
	if j := strings.IndexByte(s, '\n'); j >= 0 {
		s = s[:j]
	}
	if len(s) > 60 {
		s = s[:60]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

func quote(s string) string {
	if len(s) > 200 {
		cut := 200
		for !utf8.ValidString(s[:cut]) {
			cut--
		}
		return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
