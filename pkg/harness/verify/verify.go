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
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
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

	// CompilesRust passes when File compiles as a Rust library crate
	// (rustc --crate-type lib), in the sandbox.
	CompilesRust Kind = "compiles_rust"
	// RustTestPasses passes when File, with the Rust test module Test
	// added by the harness, compiles as a test binary and every test in
	// Test passes, in the sandbox.
	RustTestPasses Kind = "rust_test_passes"
	// EachCompilesRust passes when every one of Files compiles as a Rust
	// library crate on its own.
	EachCompilesRust Kind = "each_compiles_rust"
	// WorkspaceTestPasses passes when Files, compiled together as one
	// crate with the test module Test, pass every test in Test.
	WorkspaceTestPasses Kind = "workspace_test_passes"
	// GoTestPasses passes when the tests of Package (default ./...) in
	// the workspace, built offline without cgo, exit 0 and every test
	// function of the pinned test files reported its pass on the gate's
	// own channel.
	GoTestPasses Kind = "go_test_passes"
	// CommandSucceeds passes when Argv, run in a copy of the workspace in
	// the sandbox, exits 0.
	CommandSucceeds Kind = "command_succeeds"
	// WasmCommandSucceeds passes when the WebAssembly module Argv[0] (a
	// host path, or a path in the workspace), run against a copy of the
	// workspace in the sandbox's wasi backend, exits 0.
	WasmCommandSucceeds Kind = "wasm_command_succeeds"
)

// kinds lists every kind, for messages.
const kinds = "file_contains, file_equals, workspace_file_contains, json_schema, compiles_rust, rust_test_passes, " +
	"each_compiles_rust, workspace_test_passes, go_test_passes, command_succeeds or wasm_command_succeeds"

// Check is one verification gate.
type Check struct {
	Kind Kind `json:"kind"`
	// File is the slash-separated workspace-relative path the gate reads.
	File string `json:"file,omitempty"`
	// Files are the workspace files of each_compiles_rust and
	// workspace_test_passes.
	Files []string `json:"files,omitempty"`
	// Text is the substring FileContains and WorkspaceFileContains want.
	Text string `json:"text,omitempty"`
	// Content is the exact content FileEquals wants. A pointer, so that
	// an empty file can be asked for.
	Content *string `json:"content,omitempty"`
	// Schema is the JSON Schema document JSONSchema validates against.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Test is the Rust test module source of rust_test_passes and
	// workspace_test_passes: #[test] functions that may use the items of
	// the subject by name. It lives in the contract, where the agent
	// cannot edit it.
	Test string `json:"test,omitempty"`
	// Package is the package pattern of go_test_passes; "./..." when
	// empty.
	Package string `json:"package,omitempty"`
	// Argv is the command of command_succeeds. Its program must be
	// allowed by the exec policy.
	Argv []string `json:"argv,omitempty"`
	// Pin lists workspace files (the tests a gate judges by) that the
	// gate uses as they were when the task was validated, whatever the
	// agent did to them since.
	Pin []string `json:"pin,omitempty"`
	// Pinned holds the content of each Pin file, filled in when the task
	// is validated; a caller may give it instead.
	Pinned map[string]string `json:"pinned,omitempty"`
	// Limits caps an execution gate's sandbox; zero fields take the
	// sandbox's defaults.
	Limits sandbox.Limits `json:"limits,omitzero"`
}

// FieldError is a check that is not valid. Field is the JSON name of the
// offending field.
type FieldError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Executes reports whether the check runs a program, in the sandbox.
func (c *Check) Executes() bool {
	switch c.Kind {
	case CompilesRust, RustTestPasses, EachCompilesRust, WorkspaceTestPasses, GoTestPasses, CommandSucceeds, WasmCommandSucceeds:
		return true
	}
	return false
}

// Clone returns a copy of c that shares no slice or map with it.
func (c Check) Clone() Check {
	c.Files = slices.Clone(c.Files)
	c.Schema = slices.Clone(c.Schema)
	c.Argv = slices.Clone(c.Argv)
	c.Pin = slices.Clone(c.Pin)
	c.Pinned = maps.Clone(c.Pinned)
	return c
}

// Validate checks c and fills its defaults. defaultFile is the task's file
// in a single-file task and "" in a workspace task. It does not read the
// workspace: the caller fills Pinned.
func (c *Check) Validate(defaultFile string) error {
	switch c.Kind {
	case FileContains, FileEquals, JSONSchema, CompilesRust, RustTestPasses:
		if c.File == "" {
			c.File = defaultFile
		}
	case WorkspaceFileContains, EachCompilesRust, WorkspaceTestPasses, GoTestPasses, CommandSucceeds, WasmCommandSucceeds:
	case "":
		return &FieldError{"kind", "required; one of " + kinds}
	default:
		return &FieldError{"kind", fmt.Sprintf("unknown kind %q; want %s", c.Kind, kinds)}
	}
	switch c.Kind {
	case EachCompilesRust, WorkspaceTestPasses:
		if len(c.Files) == 0 {
			return &FieldError{"files", "required: at least one file"}
		}
		for i, f := range c.Files {
			clean, err := cleanFile(f)
			if err != nil {
				return &FieldError{fmt.Sprintf("files[%d]", i), err.Error()}
			}
			c.Files[i] = clean
		}
	case GoTestPasses, CommandSucceeds, WasmCommandSucceeds:
	default:
		if c.File == "" {
			return &FieldError{"file", "required"}
		}
		clean, err := cleanFile(c.File)
		if err != nil {
			return &FieldError{"file", err.Error()}
		}
		c.File = clean
	}
	for i, f := range c.Pin {
		clean, err := cleanFile(f)
		if err != nil {
			return &FieldError{fmt.Sprintf("pin[%d]", i), err.Error()}
		}
		c.Pin[i] = clean
	}
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
	case RustTestPasses, WorkspaceTestPasses:
		if strings.TrimSpace(c.Test) == "" {
			return &FieldError{"test", "required: the test module the subject is judged by"}
		}
		if !strings.Contains(c.Test, "#[test]") {
			return &FieldError{"test", "holds no #[test] function"}
		}
	case GoTestPasses:
		if c.Package == "" {
			c.Package = "./..."
		}
		if strings.HasPrefix(c.Package, "-") || strings.ContainsAny(c.Package, " \t\n") {
			return &FieldError{"package", "want a package pattern such as ./... or ./calc"}
		}
	case CommandSucceeds:
		if len(c.Argv) == 0 || c.Argv[0] == "" {
			return &FieldError{"argv", "required: the command to run"}
		}
	case WasmCommandSucceeds:
		if len(c.Argv) == 0 || !strings.HasSuffix(strings.ToLower(c.Argv[0]), ".wasm") {
			return &FieldError{"argv", "required: a .wasm module and its arguments"}
		}
		if !filepath.IsAbs(c.Argv[0]) {
			clean, err := cleanFile(c.Argv[0])
			if err != nil {
				return &FieldError{"argv[0]", err.Error()}
			}
			c.Argv[0] = clean
		}
	}
	if !c.Executes() && (len(c.Pin) > 0 || c.Limits != (sandbox.Limits{})) {
		return &FieldError{"pin", "only execution gates pin files or take limits"}
	}
	return nil
}

// cleanFile refuses paths that cannot name a file inside the workspace and
// returns the others in clean slash form.
func cleanFile(p string) (string, error) {
	s := strings.ReplaceAll(p, `\`, "/")
	switch {
	case strings.ContainsRune(s, 0):
		return "", errors.New("contains a NUL byte")
	case strings.HasPrefix(s, "/") || (len(s) >= 2 && s[1] == ':'):
		return "", errors.New("must be relative to the workspace root")
	}
	c := path.Clean(s)
	if c == "." {
		return "", errors.New("names the workspace root, not a file")
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errors.New("climbs out of the workspace with ..")
	}
	return c, nil
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
	case CompilesRust:
		return fmt.Sprintf("%s must compile as a Rust library (rustc --crate-type lib)", c.File)
	case RustTestPasses:
		return fmt.Sprintf("%s, with this test module added, must pass every test:\n%s", c.File, indent(c.Test))
	case EachCompilesRust:
		return fmt.Sprintf("each of %s must compile as a Rust library on its own", strings.Join(c.Files, ", "))
	case WorkspaceTestPasses:
		return fmt.Sprintf("%s, compiled together as one crate with this test module, must pass every test:\n%s", strings.Join(c.Files, ", "), indent(c.Test))
	case GoTestPasses:
		s := fmt.Sprintf("`go test %s` must pass, offline", c.Package)
		if len(c.Pin) > 0 {
			s += fmt.Sprintf(", with every test in %s run as it is now (changing those files changes nothing)", strings.Join(c.Pin, ", "))
		}
		return s
	case CommandSucceeds, WasmCommandSucceeds:
		s := fmt.Sprintf("the command %s must exit 0 in the workspace", quote(strings.Join(c.Argv, " ")))
		if len(c.Pin) > 0 {
			s += fmt.Sprintf(", with %s as they are now", strings.Join(c.Pin, ", "))
		}
		return s
	}
	return string(c.Kind)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}

// Result is what one check found.
type Result struct {
	Kind   Kind   `json:"kind"`
	File   string `json:"file,omitempty"`
	Passed bool   `json:"passed"`
	// Detail says why the check failed, or what passed.
	Detail   string        `json:"detail"`
	Duration time.Duration `json:"duration"`
	// Output is the end of an execution gate's output.
	Output string `json:"output,omitempty"`
	// Backend names the sandbox backend an execution gate ran in.
	Backend string `json:"backend,omitempty"`
	// Workspace says how an execution gate's commands saw the workspace,
	// as exec's header does: "on the workspace" (an overlay), or a copy
	// and why ("on the run's copy (3 updated): no overlay").
	Workspace string `json:"workspace,omitempty"`
	// CapHit names the sandbox limit that killed an execution gate.
	CapHit sandbox.Cap `json:"cap_hit,omitempty"`
}

// Run evaluates a validated check against the workspace. A check that
// cannot read its file, or an execution gate that cannot run, fails with
// the reason; Run never returns a Go error, because a failed check is data
// for the model. The one exception is a failure of the sandbox itself,
// which is returned as err: it says nothing about the agent's work.
func Run(ctx context.Context, env *Env, c *Check) (Result, error) {
	start := time.Now()
	var r Result
	var err error
	if c.Executes() {
		r, err = runExec(ctx, env, c)
	} else {
		r = runContent(ctx, env.Root, c)
	}
	r.Kind, r.File, r.Duration = c.Kind, c.File, time.Since(start)
	return r, err
}

// maxFile bounds what a content gate reads.
const maxFile = 64 << 20

func runContent(ctx context.Context, root *os.Root, c *Check) Result {
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

// Verifier is one check of a verification gate. The JSON kinds ([Check])
// are the built-in verifiers; a Go program adds its own beside them
// (harness.Options.Verifiers).
//
// # Contract
//
//   - Verify judges the workspace (env.Root) as the step left it. A check
//     that does not pass is a Result with Passed false and Detail saying
//     why, in words the model can act on; it is never an error.
//   - An error is the verifier's own failure, such as a sandbox that
//     could not be built; it ends the run with the harness's ErrSandbox.
//   - Code the agent wrote runs only in env.Sandbox, and every program a
//     verifier starts is asked of env.Allow first.
//   - Verify honours ctx and is safe to call again after a crash: it
//     must not change the workspace.
//   - Describe tells the model, once, what is checked.
type Verifier interface {
	Describe() string
	Verify(ctx context.Context, env *Env) (Result, error)
}

// Verify implements [Verifier] with [Run].
func (c *Check) Verify(ctx context.Context, env *Env) (Result, error) { return Run(ctx, env, c) }

var _ Verifier = (*Check)(nil)

// Schema is a compiled, self-contained JSON Schema (draft 2020-12).
type Schema struct{ s *jsonschema.Schema }

// CompileSchema compiles a JSON Schema. A reference to anything outside
// the document itself is refused.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	s, err := compileSchema(raw)
	if err != nil {
		return nil, err
	}
	return &Schema{s}, nil
}

// Check validates a JSON document against the schema. Its error says, in
// one bounded line, whether the document is not JSON or where it departs
// from the schema.
func (s *Schema) Check(doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	if err := s.s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) && len(ve.Causes) > 0 {
			// Drop the validator's header line, which names the schema's
			// location rather than what is wrong.
			var b strings.Builder
			for _, c := range ve.Causes {
				b.WriteString(c.Error())
				b.WriteByte('\n')
			}
			err = errors.New(b.String())
		}
		return errors.New(schemaFailure(err))
	}
	return nil
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
