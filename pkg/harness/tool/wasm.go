package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

var toolName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// Validate checks the registration: a tool name the vendors accept, not a
// built-in's, a schema that is a JSON object, and a module that exists.
func (w *Wasm) Validate() error {
	switch {
	case !toolName.MatchString(w.Name):
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
// may not take those names.
func IsBuiltin(name string) bool {
	switch name {
	case "read_file", "write_file", "edit_file", "list_dir", "grep", "find", "exec":
		return true
	}
	return false
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
	work, err := os.MkdirTemp("", "io-harness-wasm-")
	if err != nil {
		return errorf("%s: %v", w.Name, err)
	}
	defer os.RemoveAll(work)
	before, err := copyOut(env.Root, work)
	if err != nil {
		return errorf("%s: copy the workspace: %v", w.Name, err)
	}
	spec := &sandbox.Spec{Argv: append([]string{w.Module}, w.Argv...), Workdir: work, Stdin: raw, Limits: w.Limits}
	res, err := env.Sandbox.Run(ctx, spec)
	if err != nil {
		return errorf("%s could not run: %v", w.Name, err)
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
	copied, withheld, err := copyBack(ctx, env, work, before)
	if err != nil {
		fmt.Fprintf(&b, "copying the changes back failed: %v\n", err)
	}
	if len(copied) > 0 {
		fmt.Fprintf(&b, "changed in the workspace: %s\n", strings.Join(copied, ", "))
	}
	if len(withheld) > 0 {
		fmt.Fprintf(&b, "not copied back (the write policy does not allow it without asking): %s\n", strings.Join(withheld, ", "))
	}
	return Result{Output: strings.TrimSuffix(b.String(), "\n"), IsError: failed}
}
