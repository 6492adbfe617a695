// Command policy_run shows the permission boundary at work: a scripted
// agent tries to read a secret (refused by a rule, never shown to the
// approver), asks to change a file (the policy asks; an approver sees the
// diff and approves), and the policy explains its verdicts.
//
//	go run ./examples/policy_run
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

const model = `{"turns": [
	{"text": "First the credentials.", "tool_calls": [{"name": "read_file", "arguments": {"path": ".env"}}]},
	{"text": "Refused; I will bump the version instead.",
	 "tool_calls": [{"name": "edit_file", "arguments": {"path": "VERSION", "old_text": "1.0.0", "new_text": "1.1.0"}}]}
]}`

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "policy_run:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "policy-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, content := range map[string]string{".env": "API_TOKEN=do-not-leak\n", "VERSION": "1.0.0\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}

	// Default denies secrets and asks before writes; a project layer
	// freezes the lock file.
	p := policy.Merge(policy.Default(), policy.Policy{Defaults: policy.Default().Defaults,
		Layers: []policy.Layer{{Name: "project", Rules: []policy.Rule{{Act: policy.Write, Effect: policy.Deny, Pattern: "go.sum"}}}}})

	fmt.Fprintln(w, "== explain")
	for _, q := range []struct {
		act    policy.Act
		target string
	}{{policy.Read, ".env"}, {policy.Write, "VERSION"}, {policy.Write, "go.sum"}, {policy.Exec, "go"}, {policy.Net, "example.com:443"}} {
		fmt.Fprintln(w, p.Explain(q.act, q.target))
	}

	agent, err := scripted.Parse([]byte(model))
	if err != nil {
		return err
	}
	approver := approve.Func(func(_ context.Context, req *approve.Request) (approve.Decision, error) {
		fmt.Fprintf(w, "\n== approval requested (%s %s, asked by the %s default)\n%s", req.Act, req.Target, req.Act, req.Shown)
		fmt.Fprintln(w, "-> approved")
		return approve.Decision{Kind: approve.Approve}, nil
	})
	task := harness.TaskContract{Goal: "Bump VERSION to 1.1.0.", Root: dir,
		Verification: []verify.Check{{Kind: verify.FileEquals, File: "VERSION", Content: ptr("1.1.0\n")}}}
	fmt.Fprintln(w, "\n== run")
	res, err := harness.Run(ctx, task, harness.Options{Provider: agent, Policy: &p, Approver: approver,
		Observer: func(e harness.Event) {
			switch e.Kind {
			case harness.EventToolCall:
				fmt.Fprintf(w, "step %d: %s %s\n", e.Step, e.Tool, e.Arguments)
			case harness.EventRefusal:
				fmt.Fprintf(w, "  refused: %s\n", e.Reason)
			case harness.EventPolicy:
				fmt.Fprintf(w, "  verdict: %s %s -> %s\n", e.Act, e.Target, e.Effect)
			}
		}})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\noutcome: %s after %d steps\n", res.Outcome.Kind, res.Outcome.Steps)
	if res.Outcome.Kind != harness.Success {
		return fmt.Errorf("the run ended %s", res.Outcome.Kind)
	}
	return nil
}

func ptr(s string) *string { return &s }
