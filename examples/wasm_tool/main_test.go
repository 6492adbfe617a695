package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The example's agent calls the wasm tool and the wasm gate decides: the
// tool is built for WASI here, as make wasm-tools builds it.
func TestWasmToolRun(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot build the wasm tool")
	}
	module := filepath.Join(t.TempDir(), "wordcount.wasm")
	cmd := exec.Command(goBin, "build", "-o", module, "./tool")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the tool: %v\n%s", err, out)
	}
	var out bytes.Buffer
	if err := run(context.Background(), &out, module); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"step 2: wordcount", `"words": 10`, // the tool ran, in the sandbox, on the workspace copy
		"gate wasm_command_succeeds (sandbox wasi): passed false", // 10 words are too few
		"gate wasm_command_succeeds (sandbox wasi): passed true",
		"outcome: success after 3 steps",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}
