// Command subagents shows a tree of agents: a parent splits a workspace
// task across three children, each with its own goal and its own
// verification, under one containment (agent count, concurrency, depth
// and a token ceiling for the whole tree). The children work at once in
// the same workspace; the parent waits for them and its own gate decides.
// The model is scripted, so it runs with no key.
//
//	go run ./examples/subagents
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// model plays the parent and its children: the parent spawns one child
// per module in one turn and waits for all of them; each child fixes its
// module.
const model = `{
 "turns": [
  {"text": "Three modules, three children.", "tool_calls": [
   {"name": "spawn_agent", "arguments": {"goal": "In alpha.txt, replace TODO with done.",
     "verification": [{"kind": "workspace_file_contains", "file": "alpha.txt", "text": "done"}], "deny": {"write": ["beta.txt", "gamma.txt"]}}},
   {"name": "spawn_agent", "arguments": {"goal": "In beta.txt, replace TODO with done.",
     "verification": [{"kind": "workspace_file_contains", "file": "beta.txt", "text": "done"}], "deny": {"write": ["alpha.txt", "gamma.txt"]}}},
   {"name": "spawn_agent", "arguments": {"goal": "In gamma.txt, replace TODO with done.",
     "verification": [{"kind": "workspace_file_contains", "file": "gamma.txt", "text": "done"}], "deny": {"write": ["alpha.txt", "beta.txt"]}}}]},
  {"text": "All three are done."}],
 "agents": [
  {"path": "root/1.0", "turns": [{"tool_calls": [{"name": "edit_file", "arguments": {"path": "alpha.txt", "old_text": "TODO", "new_text": "done"}}]}]},
  {"path": "root/1.1", "turns": [{"tool_calls": [{"name": "edit_file", "arguments": {"path": "beta.txt", "old_text": "TODO", "new_text": "done"}}]}]},
  {"path": "root/1.2", "turns": [{"tool_calls": [{"name": "edit_file", "arguments": {"path": "gamma.txt", "old_text": "TODO", "new_text": "done"}}]}]}
 ]}`

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "subagents:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "subagents-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"alpha.txt", "beta.txt", "gamma.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("status: TODO\n"), 0o644); err != nil {
			return err
		}
	}
	p, err := scripted.Parse([]byte(model))
	if err != nil {
		return err
	}
	task := harness.TaskContract{Goal: "Mark every module done.", Root: dir, Verification: []verify.Check{
		{Kind: verify.WorkspaceFileContains, File: "alpha.txt", Text: "done"},
		{Kind: verify.WorkspaceFileContains, File: "beta.txt", Text: "done"},
		{Kind: verify.WorkspaceFileContains, File: "gamma.txt", Text: "done"},
	}}
	opts := harness.Options{Provider: p,
		Containment: &harness.Containment{MaxAgents: 4, MaxConcurrent: 3, MaxDepth: 1, MaxTokens: 200_000},
		Observer: func(e harness.Event) {
			switch e.Kind {
			case harness.EventAgentSpawned:
				fmt.Fprintf(w, "%s spawned %s: %s\n", e.Path, e.Agent.Path, e.Agent.Goal)
			case harness.EventAgentFinished:
				fmt.Fprintf(w, "%s collected %s: %s\n", e.Path, e.Agent.Path, e.Agent.Outcome.Kind)
			case harness.EventOutcome:
				fmt.Fprintf(w, "%s ended %s after %d step(s)\n", e.Path, e.Outcome.Kind, e.Outcome.Steps)
			}
		}}
	res, err := harness.Run(ctx, task, opts)
	if err != nil {
		return err
	}
	for _, name := range []string{"alpha.txt", "beta.txt", "gamma.txt"} {
		data, _ := os.ReadFile(filepath.Join(dir, name))
		fmt.Fprintf(w, "%s: %s", name, data)
	}
	if res.Outcome.Kind != harness.Success {
		return fmt.Errorf("the tree ended %s: %s", res.Outcome.Kind, res.Outcome.Reason)
	}
	return nil
}
