package tool

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

func realSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	return sb
}

// exec runs its command in the sandbox on the workspace; what the
// command writes and removes comes back where the write policy allows,
// and nothing else changes.
func TestExec(t *testing.T) {
	sb := realSandbox(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("input\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("original\n"), 0o644)
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	g := &recordingGate{verdict: func(a Action) Verdict { return Verdict{Action: a} },
		peek: func(act policy.Act, target string) policy.Effect {
			if target == "keep.txt" {
				return policy.Ask
			}
			return policy.Allow
		}}
	env := &Env{Root: root, Gate: g, Sandbox: sb}
	call := func(args string) Result {
		return execTool{}.Call(context.Background(), env, json.RawMessage(args))
	}

	res := call(`{"argv": ["sh", "-c", "cat in.txt; echo made > out.txt; echo changed > keep.txt; rm in.txt; echo to-stderr >&2"]}`)
	if res.IsError {
		t.Fatalf("exec failed: %s", res.Output)
	}
	for _, want := range []string{"exited with status 0", "input", "to-stderr", "changed in the workspace: out.txt", "removed from the workspace: in.txt", "- keep.txt: the write policy does not allow it without asking (ask)"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(data) != "made\n" {
		t.Errorf("out.txt = %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); string(data) != "original\n" {
		t.Errorf("keep.txt = %q: a write the policy does not allow came back", data)
	}
	if _, err := os.Stat(filepath.Join(dir, "in.txt")); err == nil {
		t.Error("an allowed deletion did not reach the workspace")
	}
	if len(g.asked) != 1 || g.asked[0].Act != policy.Exec || g.asked[0].Argv[0] != "sh" ||
		g.asked[0].Target != policy.Quote(g.asked[0].Argv) {
		t.Errorf("gate asked %+v", g.asked)
	}

	res = call(`{"argv": ["sh", "-c", "exit 7"]}`)
	if !res.IsError || !strings.Contains(res.Output, "status 7") {
		t.Errorf("a failing command: %+v", res)
	}
	res = call(`{"argv": ["sleep", "30"], "timeout_seconds": 1}`)
	if !res.IsError || !strings.Contains(res.Output, "wall limit") {
		t.Errorf("a command past its timeout: %+v", res)
	}
	res = call(`{"argv": []}`)
	if !res.IsError || !strings.Contains(res.Output, "argv") {
		t.Errorf("no argv: %+v", res)
	}
	if res := (execTool{}).Call(context.Background(), &Env{Root: root}, json.RawMessage(`{"argv": ["true"]}`)); !res.IsError || !strings.Contains(res.Output, "no sandbox") {
		t.Errorf("without a sandbox: %+v", res)
	}
}

// denyGate is a gate whose Peek denies reads and writes by name, and that
// allows every action asked about.
func denyGate(readDeny, writeDeny func(string) bool) *recordingGate {
	return &recordingGate{verdict: func(a Action) Verdict { return Verdict{Action: a} },
		peek: func(act policy.Act, target string) policy.Effect {
			if act == policy.Read && readDeny != nil && readDeny(target) || act == policy.Write && writeDeny != nil && writeDeny(target) {
				return policy.Deny
			}
			return policy.Allow
		}}
}

// The command sees only what the read policy shows: a read-denied .env
// is not in its copy. The negative control is the same command with no
// gate, which prints the secret.
func TestExecSeesOnlyWhatReadsAllow(t *testing.T) {
	sb := realSandbox(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=hunter2\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "cfg"), 0o755)
	os.WriteFile(filepath.Join(dir, "cfg", ".env"), []byte("SECRET=hunter3\n"), 0o644)
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	args := json.RawMessage(`{"argv": ["sh", "-c", "cat .env cfg/.env; ls -a . cfg"]}`)

	control := execTool{}.Call(context.Background(), &Env{Root: root, Sandbox: sb}, args)
	if !strings.Contains(control.Output, "hunter2") || !strings.Contains(control.Output, "hunter3") {
		t.Fatalf("negative control: without a read policy the command should read .env:\n%s", control.Output)
	}
	g := denyGate(func(p string) bool { return filepath.Base(p) == ".env" }, nil)
	res := execTool{}.Call(context.Background(), &Env{Root: root, Sandbox: sb, Gate: g}, args)
	if strings.Contains(res.Output, "hunter") || strings.Contains(res.Output, ".env\n") {
		t.Errorf("the command read a denied file:\n%s", res.Output)
	}
	var hidden []string
	for _, v := range res.Verdicts {
		hidden = append(hidden, string(v.Act)+" "+v.Target+" "+string(v.Effect))
	}
	if diff := cmp.Diff([]string{"read .env deny", "read cfg/.env deny"}, hidden); diff != "" {
		t.Errorf("verdicts to trace (-want +got):\n%s", diff)
	}
}

// Copy-back goes on past a refused file and reports every refusal; the
// files after it still come back.
func TestExecCopyBackReportsEveryRefusal(t *testing.T) {
	sb := realSandbox(t)
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	g := denyGate(nil, func(p string) bool { return strings.HasPrefix(p, "b") })
	res := execTool{}.Call(context.Background(), &Env{Root: root, Sandbox: sb, Gate: g},
		json.RawMessage(`{"argv": ["sh", "-c", "for f in a1 b1 b2 c1 c2; do echo $f > $f; done; ln -s /etc/passwd z"]}`))
	for _, want := range []string{"changed in the workspace: a1, c1, c2", "- b1: the write policy", "- b2: the write policy", "- z: a symlink"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
	for _, f := range []string{"a1", "c1", "c2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s did not come back: %v", f, err)
		}
	}
	for _, f := range []string{"b1", "b2", "z"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s came back", f)
		}
	}
	if len(res.Verdicts) != 2 || res.Verdicts[0].Target != "b1" || res.Verdicts[1].Act != policy.Write {
		t.Errorf("verdicts %+v", res.Verdicts)
	}
}

// Copy-back of files it will not accept costs neither time nor memory:
// three sparse 1 GiB files are refused by their size before a byte is
// read (the old copy-back read each whole, 2 GiB of RSS, before it looked
// at the size).
func TestExecCopyBackIsBounded(t *testing.T) {
	sb := realSandbox(t)
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := execTool{}.Call(context.Background(), &Env{Root: root, Sandbox: sb},
		json.RawMessage(`{"argv": ["sh", "-c", "truncate -s 1G s1 s2 s3 && echo small > ok.txt"]}`))
	runtime.ReadMemStats(&after)
	if res.IsError {
		t.Fatalf("exec: %s", res.Output)
	}
	for _, f := range []string{"s1", "s2", "s3"} {
		if !strings.Contains(res.Output, "- "+f+": 1073741824 bytes, over") {
			t.Errorf("output does not refuse %s:\n%s", f, res.Output)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s came back", f)
		}
	}
	if !strings.Contains(res.Output, "changed in the workspace: ok.txt") {
		t.Errorf("the small file after them did not come back:\n%s", res.Output)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("copy-back allocated %d MiB", grew>>20)
	}
}

// A command that takes the permissions away from directories it made
// leaves nothing behind, even when the harness is not root and cannot
// ignore them. The test runs itself again as user nobody.
func TestExecLeavesNoCopyBehind(t *testing.T) {
	if tmp := os.Getenv("IOH_TOOL_CHILD_TMP"); tmp != "" {
		sb := realSandbox(t)
		ws := t.TempDir()
		root, _ := os.OpenRoot(ws)
		defer root.Close()
		res := execTool{}.Call(context.Background(), &Env{Root: root, Sandbox: sb},
			json.RawMessage(`{"argv": ["sh", "-c", "mkdir -p d/e && touch d/e/f && chmod 000 d/e d"]}`))
		if res.IsError {
			t.Fatalf("exec: %s", res.Output)
		}
		left, _ := filepath.Glob(filepath.Join(tmp, "io-harness-exec-*"))
		if len(left) > 0 {
			t.Fatalf("left behind: %v", left)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the check as an unprivileged user")
	}
	tmp, err := os.MkdirTemp("", "io-harness-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o777)
	self, _ := os.Executable()
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(tmp, "tool.test")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^TestExecLeavesNoCopyBehind$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "IOH_TOOL_CHILD_TMP="+tmp, "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "SKIP") {
		t.Skipf("as nobody the check could not run:\n%s", out)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "io-harness-exec-*"))
	if len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}
