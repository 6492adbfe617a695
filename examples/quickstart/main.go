// Command quickstart is the io-harness demo: an agent fixes a bug in a
// small Go project so that its test passes — the harness runs `go test` in
// a sandbox after every step to check — every step is recorded in a SQLite
// file, and the trace is read back from that file and printed.
//
// With ANTHROPIC_API_KEY and ANTHROPIC_MODEL set (or the OPENAI_ or
// OPENROUTER_ pair) it uses that provider. With no API key in the
// environment it runs an embedded scripted model and says so on its first
// line of output; no network is needed.
//
//	go run ./examples/quickstart            # work in a new temporary directory
//	go run ./examples/quickstart -dir /tmp/q
package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// project is the buggy Go module the agent fixes. Its files end in .txt so
// that the Go tool does not treat them as part of this repository.
//
//go:embed project
var project embed.FS

// model is the scripted agent used when no API key is set: it finds Add,
// reads the test and the code, and fixes the operator.
const model = `{"name": "scripted-demo", "turns": [
	{"text": "I'll find Add and the test that exercises it.",
	 "tool_calls": [{"name": "grep", "arguments": {"pattern": "func (Test)?Add"}},
	                {"name": "read_file", "arguments": {"path": "calc_test.go"}}],
	 "usage": {"input_tokens": 1850, "output_tokens": 64}},
	{"text": "TestAdd expects Add(2, 3) == 5. Let me read the implementation.",
	 "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.go"}}],
	 "usage": {"input_tokens": 2240, "output_tokens": 41}},
	{"text": "Add subtracts instead of adding; fixing the operator.",
	 "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.go", "old_text": "return a - b", "new_text": "return a + b"}}],
	 "usage": {"input_tokens": 2460, "output_tokens": 58}}
]}`

func main() {
	dir := flag.String("dir", "", "directory to work in; a new temporary directory when empty")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, os.LookupEnv, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run is the whole demo; main and the test call it.
func run(ctx context.Context, w io.Writer, lookup func(string) (string, bool), dir string) error {
	p, note, err := chooseProvider(lookup)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "io-harness quickstart: "+note)

	if dir == "" {
		if dir, err = os.MkdirTemp("", "io-harness-quickstart-"); err != nil {
			return err
		}
	}
	root := filepath.Join(dir, "calc")
	if err := copyProject(root); err != nil {
		return err
	}
	dbPath := filepath.Join(dir, "trace.db")
	fmt.Fprintf(w, "workspace %s\ntrace     %s\n\n", root, dbPath)

	st, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		return err
	}
	defer st.Close()
	task := harness.TaskContract{
		Goal: "The test TestAdd in calc_test.go fails. Fix the code (not the test) so that it passes.",
		Root: root,
		Constraints: []string{
			"Do not edit calc_test.go.",
			"Keep the change minimal.",
		},
		SuccessCriteria: []string{"Add returns the sum of its arguments, so `go test ./...` passes."},
		// The gate runs the project's tests in the sandbox after every
		// step; calc_test.go is pinned, so editing it changes nothing.
		Verification: []verify.Check{
			{Kind: verify.GoTestPasses, Pin: []string{"calc_test.go"}},
		},
		Budgets: harness.Budgets{MaxSteps: 8, MaxTokens: 60000},
	}
	res, err := harness.Run(ctx, task, harness.Options{Provider: p, Store: st, Observer: progress(w)})
	if err != nil {
		return err
	}

	// Read the run back from the file, as another process would.
	st.Close()
	again, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		return err
	}
	defer again.Close()
	trace, err := harness.ReadTrace(ctx, again, res.RunID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n--- trace of %s, read back from %s ---\n", res.RunID, dbPath)
	if err := trace.WriteText(w); err != nil {
		return err
	}
	if res.Outcome.Kind != harness.Success {
		return fmt.Errorf("the run ended %s: %s", res.Outcome.Kind, res.Outcome.Reason)
	}
	fmt.Fprintf(w, "\nThe fixed project is in %s; its tests passed in the sandbox.\n", root)
	return nil
}

// chooseProvider picks the real provider whose key is in the environment
// (Anthropic, then OpenAI, then OpenRouter; the model comes from the
// matching *_MODEL variable, and there is no default model), or else the
// embedded scripted model. It returns the first line's note.
func chooseProvider(lookup func(string) (string, bool)) (provider.Provider, string, error) {
	vendors := []struct {
		key   string
		model string
		build func() (provider.Provider, error)
	}{
		{anthropic.EnvAPIKey, anthropic.EnvModel, func() (provider.Provider, error) { return anthropic.New(anthropic.ConfigFromEnv(lookup)) }},
		{openai.EnvAPIKey, openai.EnvModel, func() (provider.Provider, error) { return openai.New(openai.ConfigFromEnv(lookup)) }},
		{openrouter.EnvAPIKey, openrouter.EnvModel, func() (provider.Provider, error) { return openrouter.New(openrouter.ConfigFromEnv(lookup)) }},
	}
	for _, v := range vendors {
		if key, _ := lookup(v.key); key == "" {
			continue
		}
		if model, _ := lookup(v.model); model == "" {
			return nil, "", fmt.Errorf("%s is set but %s is not: name the model to use", v.key, v.model)
		}
		p, err := v.build()
		if err != nil {
			return nil, "", err
		}
		return p, fmt.Sprintf("%s is set, so the agent is %s.", v.key, p.Name()), nil
	}
	p, err := scripted.Parse([]byte(model))
	if err != nil {
		return nil, "", err
	}
	return p, "no API key in the environment, so the embedded scripted model plays the agent.", nil
}

// progress prints the run as it happens.
func progress(w io.Writer) func(harness.Event) {
	return func(e harness.Event) {
		switch e.Kind {
		case harness.EventStepStarted:
			fmt.Fprintf(w, "step %d\n", e.Step)
		case harness.EventModelDone:
			if t := strings.TrimSpace(e.Text); t != "" {
				fmt.Fprintf(w, "  model: %s\n", t)
			}
		case harness.EventToolCall:
			fmt.Fprintf(w, "  tool:  %s %s\n", e.Tool, e.Arguments)
		case harness.EventRefusal:
			fmt.Fprintf(w, "  refused: %s\n", e.Reason)
		case harness.EventRetry:
			fmt.Fprintf(w, "  retry in %dms: %s\n", e.WaitMS, e.Reason)
		case harness.EventVerification:
			for _, c := range e.Checks {
				fmt.Fprintf(w, "  verification %s: passed %v (%s)\n", c.Kind, c.Passed, c.Detail)
			}
		case harness.EventOutcome:
			fmt.Fprintf(w, "outcome: %s after %d step(s), %d tokens, %s\n", e.Outcome.Kind, e.Outcome.Steps, e.Outcome.Usage.Total(), e.Outcome.Cost)
		}
	}
}

// copyProject writes the embedded project to root, dropping the .txt
// suffixes.
func copyProject(root string) error {
	if _, err := os.Stat(root); err == nil {
		return fmt.Errorf("%s already exists; choose another -dir", root)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fs.WalkDir(project, "project", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := project.ReadFile(path)
		if err != nil {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(path, "project/"), ".txt")
		dst := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}
