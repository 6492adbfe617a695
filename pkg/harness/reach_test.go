package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/git"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// A run with git tools sees its changes and commits them under the spec's
// identity, in the run's sandbox; a policy that denies the commit keeps
// it from happening, as an observation.
func TestRunWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("git is not installed: %v", err)
	}
	if _, err := sandbox.New(context.Background(), nil); err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	hostGit := func(dir string, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
			"GIT_AUTHOR_NAME=setup", "GIT_AUTHOR_EMAIL=setup@example.invalid", "GIT_COMMITTER_NAME=setup", "GIT_COMMITTER_EMAIL=setup@example.invalid")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, denyCommit := range []bool{false, true} {
		dir := workspace(t, map[string]string{"a.txt": "one\n"})
		hostGit(dir, "init", "-q", "-b", "main")
		hostGit(dir, "add", "a.txt")
		hostGit(dir, "commit", "-q", "-m", "first")
		turns := []scripted.Turn{
			calls(write("a.txt", "two\n")),
			calls(call("git_status", map[string]any{})),
			calls(call("git_add", map[string]any{"paths": []string{"a.txt"}})),
			calls(call("git_commit", map[string]any{"message": "change a"})),
			text("committed"),
		}
		var pol = policyOf(t, `{"version":1,"defaults":{"read":"allow","write":"allow","exec":"allow","net":"deny"}}`)
		if denyCommit {
			pol = policyOf(t, `{"version":1,"defaults":{"read":"allow","write":"allow","exec":"allow","net":"deny"},
				"layers":[{"name":"project","rules":[{"act":"exec","effect":"deny","pattern":"git commit*"}]}]}`)
		}
		var ev events
		res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "commit the change", Root: dir},
			harness.Options{Provider: script(t, turns...), Store: memStore(t), Observer: ev.observe, Policy: pol,
				Git: &git.Config{Name: "Agent", Email: "agent@example.invalid"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome.Kind != harness.Finished {
			t.Fatalf("deny=%v: %+v", denyCommit, res.Outcome)
		}
		var status, commit string
		for _, e := range ev.of(harness.EventToolResult) {
			switch e.Tool {
			case "git_status":
				status = e.Output
			case "git_commit":
				commit = e.Output
			}
		}
		if !strings.Contains(status, "a.txt") {
			t.Errorf("git_status did not show the change: %q", status)
		}
		log := hostGit(dir, "log", "--format=%an <%ae> %s")
		switch {
		case !denyCommit && !strings.HasPrefix(log, "Agent <agent@example.invalid> change a"):
			t.Errorf("the commit is not there under the spec's identity:\n%s\n(git_commit said %q)", log, commit)
		case denyCommit && strings.Contains(log, "change a"):
			t.Errorf("a denied commit happened:\n%s", log)
		case denyCommit && !strings.Contains(commit, "refused") && !strings.Contains(commit, "denied"):
			t.Errorf("the denied commit's observation does not say so: %q", commit)
		}
	}
}

// A run with skills lists them in its system prompt, and read_skill gives
// the model a skill's instructions and its companion file.
func TestRunWithSkills(t *testing.T) {
	skills := t.TempDir()
	sk := filepath.Join(skills, "release")
	os.MkdirAll(sk, 0o755)
	os.WriteFile(filepath.Join(sk, "SKILL.md"), []byte("---\nname: release\ndescription: How we cut a release.\n---\nBump VERSION, then tag.\n"), 0o644)
	os.WriteFile(filepath.Join(sk, "checklist.md"), []byte("- changelog\n- tag\n"), 0o644)
	rec := &recorder{Provider: script(t,
		calls(call("read_skill", map[string]any{"name": "release"})),
		calls(call("read_skill", map[string]any{"name": "release", "file": "checklist.md"})),
		text("done"))}
	var ev events
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "release", Root: workspace(t, nil)},
		harness.Options{Provider: rec, Store: memStore(t), Observer: ev.observe, Skills: []string{skills}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Finished {
		t.Fatalf("%+v", res.Outcome)
	}
	if sys := rec.requests[0].System; !strings.Contains(sys, "release") || !strings.Contains(sys, "How we cut a release.") {
		t.Errorf("the system prompt does not list the skill:\n%s", sys)
	}
	var outs []string
	for _, e := range ev.of(harness.EventToolResult) {
		outs = append(outs, e.Output)
	}
	if len(outs) != 2 || !strings.Contains(outs[0], "Bump VERSION, then tag.") || !strings.Contains(outs[1], "- changelog") {
		t.Errorf("read_skill results: %q", outs)
	}
}

// reachFaults runs a run with every reach option on (the git tools,
// view_image and a skill) and returns what is wrong with the tools it
// offers beside the workspace's: a name tool.Reserved does not hold or
// tool.IsBuiltin does not know, a reserved name the run does not offer,
// or one a registered tool may still take. edit, when set, changes the
// run's options.
func reachFaults(t *testing.T, edit func(*harness.Options)) []string {
	t.Helper()
	skills := t.TempDir()
	os.MkdirAll(filepath.Join(skills, "release"), 0o755)
	os.WriteFile(filepath.Join(skills, "release", "SKILL.md"), []byte("---\nname: release\ndescription: How we cut a release.\n---\nBump VERSION, then tag.\n"), 0o644)
	run := func(p provider.Provider, registered ...tool.Tool) error {
		opts := harness.Options{Provider: p, Store: memStore(t), Tools: registered,
			Git: &git.Config{Name: "Agent", Email: "agent@example.invalid"}, ViewImage: true, Skills: []string{skills}}
		if edit != nil {
			edit(&opts)
		}
		_, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: workspace(t, nil)}, opts)
		return err
	}
	rec := &recorder{Provider: script(t, text("done"))}
	if err := run(rec); err != nil {
		t.Fatal(err)
	}
	var built []string
	for _, s := range rec.requests[0].Tools {
		if !slices.ContainsFunc(tool.Workspace(), func(w tool.Tool) bool { return w.Spec().Name == s.Name }) {
			built = append(built, s.Name)
		}
	}
	reserved := tool.Reserved()
	slices.Sort(built)
	slices.Sort(reserved)
	var faults []string
	if diff := cmp.Diff(built, reserved); diff != "" {
		faults = append(faults, fmt.Sprintf("tool.Reserved against the tools built (-built +reserved):\n%s", diff))
	}
	for _, name := range built {
		if !tool.IsBuiltin(name) {
			faults = append(faults, name+" is not reserved")
		}
		var he *harness.Error
		if err := run(script(t, text("done")), namedTool(name)); !errors.As(err, &he) || he.Kind != harness.ErrConfig || he.Field != "options.tools[0]" {
			faults = append(faults, fmt.Sprintf("a registered tool took the name %s: %v", name, err))
		}
	}
	return faults
}

// The names tool.Reserved keeps from registered tools are exactly the
// tools a run builds from the git, skill and media packages: a new one
// there is a failure here until it is reserved. The negative control is
// the same run building one tool more, as a new reach tool would be.
func TestReservedNamesAreTheReachTools(t *testing.T) {
	if faults := reachFaults(t, nil); len(faults) > 0 {
		t.Error(strings.Join(faults, "\n"))
	}
	faults := reachFaults(t, func(o *harness.Options) { harness.AddReachTool(o, namedTool("git_stash")) })
	if len(faults) == 0 {
		t.Fatal("the negative control: a run built git_stash, which is not reserved, and the test found nothing wrong")
	}
	t.Logf("with an unreserved reach tool:\n%s", strings.Join(faults, "\n"))
}

// namedTool is a tool of that name that does nothing.
type namedTool string

func (n namedTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: string(n), Description: "does nothing", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (n namedTool) Call(context.Context, *tool.Env, json.RawMessage) tool.Result {
	return tool.Result{Output: "nothing"}
}
