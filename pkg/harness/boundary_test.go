package harness_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// execPolicy allows every read and write and every command, but for the
// rules given: only they stand between an attack and its effect.
func execPolicy(rules ...policy.Rule) *policy.Policy {
	return &policy.Policy{Version: 1,
		Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Allow, Net: policy.Deny},
		Layers:   []policy.Layer{{Name: "project", Rules: rules}}}
}

// runExec runs one step whose only call is exec argv, under p, and
// returns the observation the model got and the events.
func runExec(t *testing.T, dir string, p *policy.Policy, ap approve.Approver, argv ...string) (string, *events) {
	t.Helper()
	if _, err := sandbox.New(context.Background(), nil); err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	st := memStore(t)
	var obs events
	task := harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 1},
		Verification: []verify.Check{contains("never.txt", "x")}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(call("exec", map[string]any{"argv": argv}))),
		Store: st, Policy: p, Approver: ap, Observer: obs.observe})
	if err != nil {
		t.Fatal(err)
	}
	steps, err := st.Steps(context.Background(), res.RunID)
	if err != nil || len(steps) != 1 {
		t.Fatalf("steps %v %v", steps, err)
	}
	return steps[0].Observations[0].Output, &obs
}

// The sandbox of exec sees only what the read policy allows: with read
// deny .env, `cat .env` prints nothing secret, and the hidden file is in
// the trace. The negative control is the same command without the rule.
func TestExecReadPolicy(t *testing.T) {
	files := map[string]string{".env": "KEY=s3cret-value", "sub/.env": "KEY=other-s3cret"}
	out, _ := runExec(t, workspace(t, files), execPolicy(), nil, "sh", "-c", "cat .env sub/.env")
	if !strings.Contains(out, "s3cret-value") {
		t.Fatalf("negative control: without a read deny the command should print the secret:\n%s", out)
	}
	out, obs := runExec(t, workspace(t, files), execPolicy(policy.Rule{Act: policy.Read, Effect: policy.Deny, Pattern: ".env"}), nil,
		"sh", "-c", "cat .env sub/.env")
	if strings.Contains(out, "s3cret") {
		t.Errorf("a read-denied file reached the sandbox:\n%s", out)
	}
	var traced []string
	for _, e := range obs.of(harness.EventPolicy) {
		if e.Act == policy.Read {
			traced = append(traced, e.Target+" "+string(e.Effect)+" "+e.Rule)
		}
	}
	if strings.Join(traced, "; ") != ".env deny .env; sub/.env deny .env" {
		t.Errorf("traced read verdicts: %q", traced)
	}
}

// Copy-back judges each file through the workspace's links as write_file
// does: with v -> vendor and write deny vendor/**, a command writing
// v/lib.go does not reach vendor/lib.go. The negative control is the same
// attack with no deny, which lands.
func TestExecCopyBackThroughALink(t *testing.T) {
	attack := []string{"sh", "-c", "mkdir -p v && echo pwned > v/lib.go"}
	mk := func() string {
		dir := workspace(t, map[string]string{"vendor/keep.go": "package vendor"})
		if err := os.Symlink("vendor", filepath.Join(dir, "v")); err != nil {
			t.Skipf("symlinks: %v", err)
		}
		return dir
	}
	control := mk()
	runExec(t, control, execPolicy(), nil, attack...)
	if data, err := os.ReadFile(filepath.Join(control, "vendor", "lib.go")); err != nil || !strings.Contains(string(data), "pwned") {
		t.Fatalf("negative control: without the deny the write through v should land in vendor/ (%q, %v)", data, err)
	}
	dir := mk()
	out, obs := runExec(t, dir, execPolicy(policy.Rule{Act: policy.Write, Effect: policy.Deny, Pattern: "vendor/**"}), nil, attack...)
	if _, err := os.Stat(filepath.Join(dir, "vendor", "lib.go")); err == nil {
		t.Fatalf("the write reached vendor/lib.go through the link:\n%s", out)
	}
	// On a copy the command wrote v/lib.go, which copy-back judges through
	// the link; on the workspace itself (an overlay) the link was followed
	// inside the sandbox, and the change is vendor/lib.go.
	if !strings.Contains(out, "- v/lib.go: the write policy does not allow it") && !strings.Contains(out, "- vendor/lib.go: the write policy does not allow it") {
		t.Errorf("the refusal is not reported:\n%s", out)
	}
	found := false
	for _, e := range obs.of(harness.EventPolicy) {
		if e.Act == policy.Write && (e.Target == "v/lib.go" || e.Target == "vendor/lib.go") && e.Effect == policy.Deny && strings.Contains(e.Rule, "vendor/**") {
			found = true
		}
	}
	if !found {
		t.Error("the write verdict is not traced")
	}
}

// No approval crosses a deny, an exec's rewrite included: with deny exec
// sh, an approver that rewrites ["echo","hello"] into sh -c does not get
// sh run. The negative control is the same rewrite where sh is allowed,
// which runs it; and a rewrite of an exec's target alone is refused.
func TestExecRewriteIsCheckedAgain(t *testing.T) {
	rewriteTo := func(argv string) approve.Approver {
		return approve.Func(func(_ context.Context, req *approve.Request) (approve.Decision, error) {
			return approve.Decision{Kind: approve.Approve, Rewrite: &approve.Rewrite{Content: &argv}}, nil
		})
	}
	pwn := `["sh","-c","echo PWNED-BY-SH"]`
	askEcho := policy.Rule{Act: policy.Exec, Effect: policy.Ask, Pattern: "echo"}

	out, _ := runExec(t, t.TempDir(), execPolicy(askEcho), rewriteTo(pwn), "echo", "hello")
	if !strings.Contains(out, "PWNED-BY-SH") {
		t.Fatalf("negative control: a rewrite to an allowed sh should run it:\n%s", out)
	}
	out, _ = runExec(t, t.TempDir(), execPolicy(askEcho, policy.Rule{Act: policy.Exec, Effect: policy.Deny, Pattern: "sh"}), rewriteTo(pwn), "echo", "hello")
	if strings.Contains(out, "PWNED") || !strings.Contains(out, "crosses a deny") {
		t.Fatalf("a rewrite crossed the deny of sh:\n%s", out)
	}
	// Hidden in a wrapper, the rewrite is still judged by what it starts.
	out, _ = runExec(t, t.TempDir(), execPolicy(askEcho, policy.Rule{Act: policy.Exec, Effect: policy.Deny, Pattern: "sh"}),
		rewriteTo(`["env","X=1","nice","sh","-c","echo PWNED"]`), "echo", "hello")
	if strings.Contains(out, "PWNED") {
		t.Fatalf("a wrapped rewrite crossed the deny of sh:\n%s", out)
	}
	target := approve.Func(func(_ context.Context, req *approve.Request) (approve.Decision, error) {
		return approve.Decision{Kind: approve.Approve, Rewrite: &approve.Rewrite{Target: "true"}}, nil
	})
	out, _ = runExec(t, t.TempDir(), execPolicy(askEcho), target, "echo", "hello")
	if !strings.Contains(out, "rewritten through its content") {
		t.Errorf("a rewrite of an exec's target was not refused:\n%s", out)
	}
}

// A bare allow names the system's program: with allow go and everything
// else denied, a go the agent put in the workspace does not run, however
// it is spelled; the system's go does.
func TestExecAllowIsTheSystemsProgram(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	p := &policy.Policy{Version: 1,
		Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Deny, Net: policy.Deny},
		Layers:   []policy.Layer{{Name: "tools", Rules: []policy.Rule{{Act: policy.Exec, Effect: policy.Allow, Pattern: "go"}, {Act: policy.Exec, Effect: policy.Allow, Pattern: "sh"}}}}}
	evil := map[string]string{"go": "#!/bin/sh\necho EVIL-GO\n", "tools/go": "#!/bin/sh\necho EVIL-GO\n"}
	for _, argv := range [][]string{{"./go"}, {"tools/go"}, {"sh", "-c", "./go"}, {"sh", "-c", "PATH=.:$PATH go version"}} {
		dir := workspace(t, evil)
		os.Chmod(filepath.Join(dir, "go"), 0o755)
		os.Chmod(filepath.Join(dir, "tools", "go"), 0o755)
		out, _ := runExec(t, dir, p, nil, argv...)
		if strings.Contains(out, "EVIL-GO") || !strings.Contains(out, "[refused]") {
			t.Errorf("%q ran the workspace's go:\n%s", argv, out)
		}
	}
	out, _ := runExec(t, t.TempDir(), p, nil, "go", "version")
	if !strings.Contains(out, "go version go") {
		t.Errorf("the system's go (%s) did not run:\n%s", goBin, out)
	}
}

// A link at the end of a path is judged by the file it leads to: with
// lib.go -> vendor/lib.go and write deny vendor/**, a command that writes
// lib.go in its copy (where the link is not) does not write vendor/lib.go
// on the way back. The negative control is the same attack with no deny.
func TestExecCopyBackThroughALeafLink(t *testing.T) {
	attack := []string{"sh", "-c", "echo pwned > lib.go"}
	mk := func() string {
		dir := workspace(t, map[string]string{"vendor/lib.go": "package vendor"})
		if err := os.Symlink("vendor/lib.go", filepath.Join(dir, "lib.go")); err != nil {
			t.Skipf("symlinks: %v", err)
		}
		return dir
	}
	control := mk()
	runExec(t, control, execPolicy(), nil, attack...)
	if data, _ := os.ReadFile(filepath.Join(control, "vendor", "lib.go")); !strings.Contains(string(data), "pwned") {
		t.Fatalf("negative control: without the deny the write through lib.go should land in vendor/ (%q)", data)
	}
	dir := mk()
	out, _ := runExec(t, dir, execPolicy(policy.Rule{Act: policy.Write, Effect: policy.Deny, Pattern: "vendor/**"}), nil, attack...)
	if data, _ := os.ReadFile(filepath.Join(dir, "vendor", "lib.go")); strings.Contains(string(data), "pwned") {
		t.Fatalf("the write reached vendor/lib.go through the link:\n%s", out)
	}
}

// A walk that starts at a directory link is judged where the files
// really are: grep in v (-> vendor) does not search vendor/secret.txt
// when reads of vendor/secret.txt are denied. The negative control greps
// without the rule.
func TestWalkThroughADirectoryLink(t *testing.T) {
	mk := func() string {
		dir := workspace(t, map[string]string{"vendor/secret.txt": "TOKEN=abc123", "vendor/ok.txt": "TOKEN=public"})
		if err := os.Symlink("vendor", filepath.Join(dir, "v")); err != nil {
			t.Skipf("symlinks: %v", err)
		}
		return dir
	}
	grepOut := func(p *policy.Policy) string {
		st := memStore(t)
		task := harness.TaskContract{Goal: "g", Root: mk(), Budgets: harness.Budgets{MaxSteps: 1},
			Verification: []verify.Check{contains("never.txt", "x")}}
		res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(call("grep", map[string]any{"pattern": "TOKEN", "path": "v"}))),
			Store: st, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		steps, _ := st.Steps(context.Background(), res.RunID)
		return steps[0].Observations[0].Output
	}
	if out := grepOut(execPolicy()); !strings.Contains(out, "abc123") {
		t.Fatalf("negative control: without the rule grep should find the token:\n%s", out)
	}
	out := grepOut(execPolicy(policy.Rule{Act: policy.Read, Effect: policy.Deny, Pattern: "vendor/secret.txt"}))
	if strings.Contains(out, "abc123") || !strings.Contains(out, "public") {
		t.Errorf("grep through the link:\n%s", out)
	}
}

// A gate's copy of the workspace holds what the read policy allows: a
// failing gate that prints .env shows the model nothing secret. The
// negative control is the same gate without the read deny.
func TestGateCopyReadPolicy(t *testing.T) {
	if _, err := sandbox.New(context.Background(), nil); err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	gateOut := func(p *policy.Policy) (string, *events) {
		st := memStore(t)
		var obs events
		task := harness.TaskContract{Goal: "g", Root: workspace(t, map[string]string{".env": "KEY=s3cret-value"}),
			Budgets:      harness.Budgets{MaxSteps: 1},
			Verification: []verify.Check{{Kind: verify.CommandSucceeds, Argv: []string{"sh", "-c", "cat .env; exit 1"}}}}
		res, err := harness.Run(context.Background(), task, harness.Options{Provider: script(t, calls(call("list_dir", map[string]any{}))),
			Store: st, Policy: p, Observer: obs.observe})
		if err != nil {
			t.Fatal(err)
		}
		steps, _ := st.Steps(context.Background(), res.RunID)
		var b strings.Builder
		for _, o := range steps[0].Observations {
			b.WriteString(o.Output + "\n")
		}
		return b.String(), &obs
	}
	if out, _ := gateOut(execPolicy()); !strings.Contains(out, "s3cret-value") {
		t.Fatalf("negative control: without a read deny the gate's output should show the secret:\n%s", out)
	}
	out, obs := gateOut(execPolicy(policy.Rule{Act: policy.Read, Effect: policy.Deny, Pattern: ".env"}))
	if strings.Contains(out, "s3cret") {
		t.Errorf("a read-denied file reached the gate's output:\n%s", out)
	}
	traced := false
	for _, e := range obs.of(harness.EventPolicy) {
		traced = traced || e.Act == policy.Read && e.Target == ".env" && e.Effect == policy.Deny
	}
	if !traced {
		t.Error("the file hidden from the gate is not traced")
	}
}
