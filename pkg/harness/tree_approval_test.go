package harness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// treeApprovalProvider is the model of the approval test: the root
// spawns two children and waits for both; the first child writes a file
// whose write asks a person, the second a file that needs no one.
func treeApprovalProvider(t testing.TB) *scripted.Provider {
	return treeScript(t, []scripted.Turn{
		calls(call("spawn_agent", map[string]any{"goal": "write the guarded file"}), call("spawn_agent", map[string]any{"goal": "write a free file"})),
		calls(call("collect_agents", map[string]any{})),
		text("root done"),
	}, scripted.AgentScript{Path: "root/1.0", Turns: []scripted.Turn{
		calls(write("guarded/config.toml", "approved = true\n")),
		text("wrote the guarded file"),
	}}, scripted.AgentScript{Path: "root/1.1", Turns: []scripted.Turn{
		calls(write("free.txt", "free\n")),
		text("wrote the free file"),
	}})
}

func treeApprovalPolicy() *policy.Policy {
	return &policy.Policy{Version: 1, Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Deny, Net: policy.Deny},
		Layers: []policy.Layer{{Name: "project", Rules: []policy.Rule{{Act: policy.Write, Effect: policy.Ask, Pattern: "guarded/**"}}}}}
}

// TestTreeApprovalChild is the process TestTreeApprovalAcrossProcesses
// starts: "start" drives the tree until it waits for a person, "resume"
// resumes it without a decision, "approve" answers from a fresh process.
func TestTreeApprovalChild(t *testing.T) {
	mode := os.Getenv(deferModeEnv)
	if mode == "" || !strings.HasPrefix(mode, "tree-") {
		return // a helper process: it runs only when its test starts it
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, os.Getenv(deferStoreEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := &recorder{Provider: treeApprovalProvider(t)}
	opts := harness.Options{Provider: rec, Store: st, Policy: treeApprovalPolicy(), Approver: approve.DeferAll(),
		Containment: &harness.Containment{MaxAgents: 3, MaxConcurrent: 2}}
	var res *harness.Result
	switch mode {
	case "tree-start":
		res, err = harness.Run(ctx, harness.TaskContract{Goal: "split", Root: os.Getenv(deferRootEnv)}, opts)
	case "tree-resume":
		res, err = harness.Resume(ctx, os.Getenv(deferArgEnv), opts, harness.ResumeOptions{})
	case "tree-approve":
		runID, reqID, _ := strings.Cut(os.Getenv(deferArgEnv), " ")
		res, err = harness.ResumeWithDecision(ctx, runID, reqID, approve.Decision{Kind: approve.Approve}, opts, harness.ResumeOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("RESULT %s %s %s %d\n", res.Outcome.Kind, res.RunID, res.Outcome.RequestID, rec.count())
}

// An approval pending anywhere in a tree survives the process: the tree
// ends its drive waiting for it (the sibling that needed no one finishes
// meanwhile), a resume without a decision calls no model, and a decision
// made from another process — naming the child's request on the root —
// lets the tree finish, the approved write done once.
func TestTreeApprovalAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the test starts processes")
	}
	dir := t.TempDir()
	root := workspace(t, nil)
	dbPath := filepath.Join(dir, "trace.db")
	child := func(mode, arg string) []string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTreeApprovalChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), deferModeEnv+"="+mode, deferStoreEnv+"="+dbPath, deferRootEnv+"="+root, deferArgEnv+"="+arg)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s process: %v\n%s", mode, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f, ok := strings.CutPrefix(line, "RESULT "); ok {
				return strings.Fields(f)
			}
		}
		t.Fatalf("%s process printed no result:\n%s", mode, out)
		return nil
	}
	first := child("tree-start", "")
	if first[0] != string(harness.AwaitingApproval) || len(first) < 4 {
		t.Fatalf("first process ended %v", first)
	}
	rootID, reqID := first[1], first[2]
	if _, err := os.Stat(filepath.Join(root, "guarded/config.toml")); err == nil {
		t.Fatal("the guarded write happened before the decision")
	}
	if data, _ := os.ReadFile(filepath.Join(root, "free.txt")); string(data) != "free\n" {
		t.Errorf("the sibling that needed no one did not finish its write: %q", data)
	}
	// The request is the child's, and the tree stands as it was left.
	st, err := sqlite.OpenReadOnly(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(context.Background(), store.RunFilter{RootID: rootID})
	st.Close()
	if err != nil || len(runs) != 3 {
		t.Fatalf("the tree: %d runs, %v", len(runs), err)
	}
	states := map[string]string{}
	for _, r := range runs {
		states[r.AgentPath] = string(r.Status) + "/" + r.Outcome
	}
	want := map[string]string{"root": "paused/awaiting_approval", "root/1.0": "paused/awaiting_approval", "root/1.1": "finished/finished"}
	for k, v := range want {
		if states[k] != v {
			t.Errorf("agent %s is %s, want %s", k, states[k], v)
		}
	}
	// A resume without the decision waits on, calling no model.
	again := child("tree-resume", rootID)
	if again[0] != string(harness.AwaitingApproval) || again[3] != "0" {
		t.Errorf("a resume without a decision: %v (model calls last)", again)
	}
	done := child("tree-approve", rootID+" "+reqID)
	if done[0] != string(harness.Finished) || done[1] != rootID {
		t.Fatalf("after the decision: %v", done)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "guarded/config.toml")); string(data) != "approved = true\n" {
		t.Errorf("guarded/config.toml = %q", data)
	}
	st, err = sqlite.OpenReadOnly(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, _ = st.Runs(context.Background(), store.RunFilter{RootID: rootID})
	for _, r := range runs {
		if r.Status != store.StatusFinished || r.Outcome != string(harness.Finished) {
			t.Errorf("agent %s ended %s/%s", r.AgentPath, r.Status, r.Outcome)
		}
	}
}
