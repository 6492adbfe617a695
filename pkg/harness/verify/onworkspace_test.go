package verify

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command gate on the workspace itself sees it as the user has it
// (node_modules and .git included, which a copy leaves out), cannot read
// what the read policy refuses, and changes nothing in it. The controls:
// the same gate with no read policy reads the secret, and the same gate
// on a copy does not see node_modules.
func TestCommandGateOnTheWorkspace(t *testing.T) {
	files := map[string]string{
		"node_modules/dep/index.js": "module.exports = 1\n",
		".git/HEAD":                 "ref: refs/heads/main\n",
		"secret.env":                "TOKEN=hunter2\n",
		"a.txt":                     "a\n",
	}
	gate := func(env *Env, script string) Result {
		t.Helper()
		c := Check{Kind: CommandSucceeds, Argv: []string{"sh", "-c", script}, Limits: gateLimits}
		if err := c.Validate(""); err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), env, &c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	env := execEnv(t, files, "")
	if !env.Sandbox.Enforcement().Overlay {
		t.Fatalf("%s holds no changes apart here; linux-ns does on this kernel", env.Sandbox.Name())
	}
	dir := env.Root.Name()

	if r := gate(env, "test -f node_modules/dep/index.js && grep -q main .git/HEAD"); !r.Passed {
		t.Errorf("the gate did not see node_modules and .git: %s\n%s", r.Detail, r.Output)
	}
	if r := gate(&Env{Root: env.Root, Sandbox: noOverlay{env.Sandbox}, Getenv: os.Getenv}, "test -f node_modules/dep/index.js"); r.Passed {
		t.Error("control: a copy of the workspace should leave node_modules out")
	}

	if r := gate(env, "grep -q hunter2 secret.env"); !r.Passed {
		t.Fatalf("control: with no read policy the gate should read secret.env: %s\n%s", r.Detail, r.Output)
	}
	env.Visible = func(rel string) bool { return rel != "secret.env" }
	if r := gate(env, "cat secret.env; ls -a; grep -q hunter2 secret.env"); r.Passed || strings.Contains(r.Output, "hunter2") {
		t.Errorf("the gate read a file the read policy refuses: %s\n%s", r.Detail, r.Output)
	}

	if r := gate(env, "echo changed > a.txt; rm -f node_modules/dep/index.js; echo new > new.txt; echo x > .git/HEAD; true"); !r.Passed {
		t.Fatalf("%s\n%s", r.Detail, r.Output)
	}
	for name, want := range files {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(data) != want {
			t.Errorf("%s = %q, %v after the gate; want it unchanged", name, data, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Error("a file the gate's command made reached the workspace")
	}
}
