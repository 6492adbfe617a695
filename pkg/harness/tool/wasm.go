package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Wasm is a tool compiled to WebAssembly (WASI preview 1): the caller
// registers the module with a name, a description and a JSON schema, and
// the model calls it like any built-in tool. It runs in the sandbox's wasi
// backend on a copy of the workspace mounted as its working directory;
// what it writes comes back where the write policy allows, as with exec.
// Like every registered tool, each call is checked by the harness against
// the exec policy on the tool's name before it runs.
//
// The call's arguments reach the module as JSON on its standard input;
// Argv, when set, are its command-line arguments after the program name.
// Its standard output is the observation.
type Wasm struct {
	// Name is the tool's name; it must not be a built-in tool's.
	Name string `json:"name"`
	// Description tells the model what the tool does.
	Description string `json:"description"`
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage `json:"parameters"`
	// Module is the host path of the .wasm file.
	Module string `json:"module"`
	// Argv are the module's arguments after its name.
	Argv []string `json:"argv,omitempty"`
	// Limits cap each call; zero fields take the sandbox's defaults.
	Limits sandbox.Limits `json:"limits,omitzero"`
}

// ValidName reports whether name is a tool name every vendor's tool API
// accepts: a letter, then at most 63 letters, digits, '_' or '-'. Wasm
// and host-language tools must have one.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 || !isLetter(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !isLetter(c) && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// Validate checks the registration: a tool name the vendors accept, not a
// built-in's, a schema that is a JSON object, and a module that exists.
func (w *Wasm) Validate() error {
	switch {
	case !ValidName(w.Name):
		return fmt.Errorf("tool: wasm tool name %q: want a letter, then up to 63 letters, digits, _ or -", w.Name)
	case IsBuiltin(w.Name):
		return fmt.Errorf("tool: wasm tool name %q is a built-in tool's", w.Name)
	case strings.TrimSpace(w.Description) == "":
		return fmt.Errorf("tool: wasm tool %s: description: required", w.Name)
	case !filepath.IsAbs(w.Module) || !strings.HasSuffix(strings.ToLower(w.Module), ".wasm"):
		return fmt.Errorf("tool: wasm tool %s: module: want the absolute path of a .wasm file, got %q", w.Name, w.Module)
	}
	var schema map[string]any
	if err := json.Unmarshal(w.Parameters, &schema); err != nil || schema["type"] != "object" {
		return fmt.Errorf("tool: wasm tool %s: parameters: want a JSON Schema object of type \"object\"", w.Name)
	}
	if fi, err := os.Stat(w.Module); err != nil || fi.IsDir() {
		return fmt.Errorf("tool: wasm tool %s: module %s: %v", w.Name, w.Module, errOr(err, "a directory"))
	}
	return nil
}

func errOr(err error, s string) error {
	if err != nil {
		return err
	}
	return errors.New(s)
}

// IsBuiltin reports whether name is a built-in tool's; registered tools
// may not take those names. The set is the tools [Workspace] and
// [SingleFile] return, so a new built-in is reserved the moment it exists,
// and the tools the harness builds in its own packages (see [Reserved]).
func IsBuiltin(name string) bool {
	for _, t := range append(Workspace(), SingleFile()...) {
		if t.Spec().Name == name {
			return true
		}
	}
	for _, r := range Reserved() {
		if r == name {
			return true
		}
	}
	return false
}

// Reserved lists the built-in tools the harness makes in other packages:
// the git tools (package git), read_skill (package skill) and view_image
// (package media). They are offered when a run asks for them, are
// judged like the workspace tools (not as an exec of their name), and
// no registered tool may take their names.
func Reserved() []string {
	return []string{"git_status", "git_diff", "git_log", "git_show", "git_add", "git_commit", "git_branch",
		"read_skill", "view_image"}
}

// Spec describes the tool.
func (w *Wasm) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: w.Name, Description: w.Description, Parameters: w.Parameters}
}

// Call runs the module with the arguments on its standard input.
func (w *Wasm) Call(ctx context.Context, env *Env, args json.RawMessage) Result {
	return invoke(ctx, env, args, w.call)
}

func (w *Wasm) call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return badArgs(&argError{Field: "(arguments)", Msg: "expected a JSON object"})
	}
	if env.Sandbox == nil {
		return errorf("%s is not available: no sandbox is configured", w.Name)
	}
	res, back, err := runOnCopy(ctx, env, "io-harness-wasm-", func(dir string) *sandbox.Spec {
		return &sandbox.Spec{Argv: append([]string{w.Module}, w.Argv...), Workdir: dir, Stdin: raw, Limits: w.Limits}
	})
	if err != nil {
		return Result{IsError: true, Output: fmt.Sprintf("%s could not run: %v", w.Name, err), Verdicts: back.verdicts}
	}
	var b strings.Builder
	failed := res.CapHit != sandbox.CapNone || res.Signal != "" || res.ExitCode != 0
	switch {
	case res.CapHit != sandbox.CapNone:
		fmt.Fprintf(&b, "%s was killed: it hit the %s limit\n", w.Name, res.CapHit)
	case res.ExitCode != 0:
		fmt.Fprintf(&b, "%s failed with exit status %d\n", w.Name, res.ExitCode)
	}
	out := strings.TrimRight(string(res.Stdout), "\n")
	if failed {
		writeStream(&b, "stdout", res.Stdout, res.StdoutTruncated)
		writeStream(&b, "stderr", res.Stderr, res.StderrTruncated)
	} else {
		b.WriteString(out)
		b.WriteString("\n")
	}
	back.report(&b)
	return Result{Output: strings.TrimSuffix(b.String(), "\n"), IsError: failed, Verdicts: back.verdicts, Changed: back.copied}
}
