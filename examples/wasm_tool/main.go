// Command wasm_tool is an agent run with a tool compiled to WebAssembly: a
// scripted agent writes notes.md, checks it with the wordcount tool (a Go
// program built for WASI, registered as a tool), and the verification
// gate runs the same module against the workspace to decide success. The
// tool and the gate run in the sandbox's wasi backend.
//
//	make wasm-tools                  # builds bin/wordcount.wasm
//	go run ./examples/wasm_tool -module bin/wordcount.wasm
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

const model = `{"turns": [
	{"text": "Drafting the notes.", "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md",
	 "content": "io-harness runs tools compiled to WebAssembly in its wasi sandbox.\n"}}]},
	{"text": "Counting the words.", "tool_calls": [{"name": "wordcount", "arguments": {"files": ["notes.md"], "top": 3}}]},
	{"text": "Too short; adding a paragraph.", "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md",
	 "content": "io-harness runs tools compiled to WebAssembly in its wasi sandbox.\n\nA wasm tool sees only the workspace copy it is given: no network, no other files, capped memory and time. The same module can judge the result as a verification gate.\n"}}]}
]}`

func main() {
	module := flag.String("module", "bin/wordcount.wasm", "the wordcount tool built for WASI (make wasm-tools)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *module); err != nil {
		fmt.Fprintln(os.Stderr, "wasm_tool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, module string) error {
	module, err := filepath.Abs(module)
	if err != nil {
		return err
	}
	if _, err := os.Stat(module); err != nil {
		return fmt.Errorf("%v: build the tool first with `make wasm-tools`", err)
	}
	dir, err := os.MkdirTemp("", "wasm-tool-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	wordcount := &tool.Wasm{
		Name:        "wordcount",
		Description: "Count the lines and words of text files in the workspace and list their most frequent words. Prints JSON.",
		Parameters: json.RawMessage(`{"type": "object", "properties": {
			"files": {"type": "array", "items": {"type": "string"}, "description": "Workspace paths of the files."},
			"top": {"type": "integer", "minimum": 0, "description": "How many frequent words to list."}},
			"required": ["files"], "additionalProperties": false}`),
		Module: module,
		Argv:   []string{"-stdin"},
	}
	agent, err := scripted.Parse([]byte(model))
	if err != nil {
		return err
	}
	task := harness.TaskContract{
		Goal: "Write notes.md: at least 30 words on how io-harness runs WebAssembly tools.",
		Root: dir,
		Verification: []verify.Check{
			{Kind: verify.WasmCommandSucceeds, Argv: []string{module, "-min-words", "30", "notes.md"}},
		},
	}
	res, err := harness.Run(ctx, task, harness.Options{Provider: agent, Tools: []tool.Tool{wordcount},
		Observer: func(e harness.Event) {
			switch e.Kind {
			case harness.EventToolCall:
				fmt.Fprintf(w, "step %d: %s %s\n", e.Step, e.Tool, e.Arguments)
			case harness.EventToolResult:
				if e.Tool == "wordcount" {
					fmt.Fprintf(w, "  %s\n", e.Output)
				}
			case harness.EventVerification:
				for _, c := range e.Checks {
					fmt.Fprintf(w, "  gate %s (sandbox %s): passed %v: %s\n", c.Kind, c.Backend, c.Passed, c.Detail)
				}
			}
		}})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "outcome: %s after %d steps\n", res.Outcome.Kind, res.Outcome.Steps)
	if res.Outcome.Kind != harness.Success {
		return fmt.Errorf("the run ended %s: %s", res.Outcome.Kind, res.Outcome.Reason)
	}
	return nil
}
