package harness_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// A workspace task driven by a scripted model: the agent writes a file,
// the verification gate sees it, and the run succeeds after one step.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	model, err := scripted.Parse([]byte(`{"turns": [
		{"text": "Writing the greeting.",
		 "tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello, world\n"}}]}
	]}`))
	if err != nil {
		log.Fatal(err)
	}
	task := harness.TaskContract{
		Goal: "Create hello.txt saying hello, world.",
		Root: dir,
		Verification: []verify.Check{
			{Kind: verify.WorkspaceFileContains, File: "hello.txt", Text: "hello, world"},
		},
	}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: model})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outcome.Kind, "after", res.Outcome.Steps, "step")
	// Output: success after 1 step
}

// Resume continues a run from the store after its process died. Here the
// run stopped on its step budget; a resume with a larger budget finishes it.
func ExampleResume() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	st, err := sqlite.OpenMemory(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	model, _ := scripted.Parse([]byte(`{"turns": [
		{"tool_calls": [{"name": "list_dir"}]},
		{"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "done"}}]}
	]}`))
	task := harness.TaskContract{Goal: "Write done to out.txt.", Root: dir,
		Budgets:      harness.Budgets{MaxSteps: 1},
		Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "out.txt", Text: "done"}}}
	first, err := harness.Run(ctx, task, harness.Options{Provider: model, Store: st})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Outcome.Kind, first.Outcome.Steps)

	second, err := harness.Resume(ctx, first.RunID, harness.Options{Provider: model, Store: st}, harness.ResumeOptions{Budgets: &harness.Budgets{MaxSteps: 5}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(second.Outcome.Kind, second.Outcome.Steps, second.RunID == first.RunID)
	// Output:
	// verification_failed 1
	// success 2 true
}
