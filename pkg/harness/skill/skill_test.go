package skill

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const reviewSkill = "---\nname: review\ndescription: How to review a change.\nlicense: MIT\n---\n# Review\nRead checklist.md first.\n"

func readSkillCall(t *testing.T, tl tool.Tool, env *tool.Env, args map[string]string) tool.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	return tl.Call(context.Background(), env, raw)
}

// A skill's companion file opens; a symlink out of its directory does
// not, though the file it names is there to read (the negative control:
// the same link, followed by the OS, reads it).
func TestReadSkillStaysInItsDirectory(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, map[string]string{"secret.txt": "not for the model\n"})
	dir := filepath.Join(t.TempDir(), "review")
	write(t, dir, map[string]string{"SKILL.md": reviewSkill, "checklist.md": "- tests pass\n", "scripts/run.sh": "#!/bin/sh\n"})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "leak.txt")); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	os.Symlink("../"+filepath.Base(outside), filepath.Join(dir, "up"))
	skills, err := Load([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	tl := ReadSkill(skills)
	env := &tool.Env{}

	r := readSkillCall(t, tl, env, map[string]string{"name": "review"})
	if r.IsError || !strings.Contains(r.Output, "Read checklist.md first.") || !strings.Contains(r.Output, "- checklist.md") ||
		!strings.Contains(r.Output, "- scripts/run.sh") || strings.Contains(r.Output, "leak.txt") {
		t.Errorf("the body: %+v", r)
	}
	if r := readSkillCall(t, tl, env, map[string]string{"name": "review", "file": "checklist.md"}); r.IsError || !strings.Contains(r.Output, "- tests pass") {
		t.Errorf("the companion file: %+v", r)
	}
	// Negative control: the link works, for anyone who follows it.
	if data, err := os.ReadFile(filepath.Join(dir, "leak.txt")); err != nil || string(data) != "not for the model\n" {
		t.Fatalf("negative control: the link does not lead to the file: %q %v", data, err)
	}
	for _, f := range []string{"leak.txt", "../" + filepath.Base(outside) + "/secret.txt", filepath.Join(outside, "secret.txt"), "up/secret.txt"} {
		r := readSkillCall(t, tl, env, map[string]string{"name": "review", "file": f})
		if !r.IsError || strings.Contains(r.Output, "not for the model") {
			t.Errorf("%s was read: %+v", f, r)
		}
	}
	// The read policy judges skill:<name>/<file>.
	p := policy.Permissive()
	p.Layers = []policy.Layer{{Name: "t", Rules: []policy.Rule{{Act: policy.Read, Effect: policy.Deny, Pattern: "skill:review/scripts/**"}}}}
	env.Gate = gate{p}
	if r := readSkillCall(t, tl, env, map[string]string{"name": "review", "file": "scripts/run.sh"}); !r.IsError || r.Refusal == "" {
		t.Errorf("a read the policy denies: %+v", r)
	}
	if r := readSkillCall(t, tl, env, map[string]string{"name": "review", "file": "checklist.md"}); r.IsError {
		t.Errorf("negative control: an allowed read was refused: %s", r.Output)
	}
}

type gate struct{ p policy.Policy }

func (g gate) Authorize(_ context.Context, a tool.Action) tool.Verdict {
	if v := g.p.Explain(a.Act, a.Target); v.Effect != policy.Allow {
		return tool.Verdict{Refused: v.String()}
	}
	return tool.Verdict{Action: a}
}

func (g gate) Peek(act policy.Act, target string) policy.Verdict { return g.p.Explain(act, target) }

func TestParse(t *testing.T) {
	name, desc, body, err := Parse([]byte(reviewSkill))
	if err != nil || name != "review" || desc != "How to review a change." || body != "# Review\nRead checklist.md first.\n" {
		t.Fatalf("Parse: %q %q %q %v", name, desc, body, err)
	}
	for label, bad := range map[string]string{
		"no front matter":  "# just markdown\n",
		"unterminated":     "---\nname: x\ndescription: y\n",
		"bad yaml":         "---\nname: [x\n---\n",
		"no name":          "---\ndescription: y\n---\n",
		"bad name":         "---\nname: Bad Name\ndescription: y\n---\n",
		"no description":   "---\nname: x\n---\n",
		"name as a map":    "---\nname: {a: 1}\ndescription: y\n---\n",
		"double hyphen":    "---\nname: a--b\ndescription: y\n---\n",
		"long description": "---\nname: x\ndescription: " + strings.Repeat("y", 1025) + "\n---\n",
	} {
		if _, _, _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", label)
		}
	}
}

// A bundle contributes namespaced skills, MCP servers and deny rules; a
// broken one is dropped whole and reported, and the others load.
func TestBundles(t *testing.T) {
	base := t.TempDir()
	good := filepath.Join(base, "acme")
	write(t, good, map[string]string{
		"bundle.json":             `{"name": "acme", "mcp_servers": [{"name": "files", "command": ["node", "files.js"]}], "deny": [{"act": "exec", "effect": "deny", "pattern": "curl"}]}`,
		"skills/review/SKILL.md":  reviewSkill,
		"skills/release/SKILL.md": "---\nname: release\ndescription: Cut a release.\n---\nSteps.\n",
	})
	broken := map[string]map[string]string{
		"allows":      {"bundle.json": `{"name": "widen", "deny": [{"act": "exec", "effect": "allow", "pattern": "curl"}]}`},
		"bad-skill":   {"bundle.json": `{"name": "half"}`, "skills/ok/SKILL.md": reviewSkill, "skills/bad/SKILL.md": "no front matter\n"},
		"bad-server":  {"bundle.json": `{"name": "srv", "mcp_servers": [{"name": "x"}]}`},
		"unknown":     {"bundle.json": `{"name": "unk", "hooks": []}`},
		"no-manifest": {"skills/review/SKILL.md": reviewSkill},
		"dup":         {"bundle.json": `{"name": "acme"}`},
	}
	dirs := []string{good}
	for name, files := range broken {
		d := filepath.Join(base, name)
		write(t, d, files)
		dirs = append(dirs, d)
	}
	bundles, dropped := LoadBundles(dirs, nil)
	if len(bundles) != 1 || bundles[0].Name != "acme" {
		t.Fatalf("loaded %+v", bundles)
	}
	b := bundles[0]
	if len(b.Skills) != 2 || b.Skills[0].Name != "acme__release" || b.Skills[1].Name != "acme__review" {
		t.Errorf("skills: %+v", b.Skills)
	}
	if len(b.MCP) != 1 || b.MCP[0].Name != "acme-files" || b.Deny.Name != "bundle:acme" || len(b.Deny.Rules) != 1 {
		t.Errorf("servers %+v, rules %+v", b.MCP, b.Deny)
	}
	if len(dropped) != len(broken) {
		t.Errorf("dropped %d bundles, want %d: %+v", len(dropped), len(broken), dropped)
	}
	for _, d := range dropped {
		if d.Reason == "" {
			t.Errorf("%s dropped without a reason", d.Dir)
		}
		if strings.HasSuffix(d.Dir, "allows") && !strings.Contains(d.Reason, "only deny") {
			t.Errorf("the widening bundle's reason: %s", d.Reason)
		}
	}
	if cat := Catalog(b.Skills); !strings.Contains(cat, "- acme__review: How to review a change.") {
		t.Errorf("catalog:\n%s", cat)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(reviewSkill))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nname: &a x\ndescription: *a\n---\n"))
	f.Add([]byte("\ufeff---\r\nname: x\r\ndescription: y\r\n---\r\nbody"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name, desc, _, err := Parse(data)
		if err != nil {
			return
		}
		if checkName(name) != nil || desc == "" || len(desc) > MaxDescription {
			t.Fatalf("accepted name %q description %q", name, desc)
		}
	})
}
