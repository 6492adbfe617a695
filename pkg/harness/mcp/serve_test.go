package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// lendPolicy allows everything but writes under secret/ and any exec of
// rm.
func lendPolicy() policy.Policy {
	p := policy.Permissive()
	p.Layers = []policy.Layer{{Name: "lend", Rules: []policy.Rule{
		{Act: policy.Write, Effect: policy.Deny, Pattern: "secret/**"},
		{Act: policy.Exec, Effect: policy.Deny, Pattern: "rm"},
	}}}
	return p
}

// lend returns the server over root, with the strongest sandbox here (or
// none).
func lend(t testing.TB, root string, observe func(mcp.Served)) *mcp.Lend {
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	env := &tool.Env{Root: r, Gate: &mcp.PolicyGate{Policy: lendPolicy(), Root: r}}
	if sb, err := sandbox.New(context.Background(), nil); err == nil {
		env.Sandbox = sb
	}
	return &mcp.Lend{Env: env, Observer: observe}
}

// runLendStdio is the test binary serving IOH_MCP_SERVE's directory on
// stdio, tracing every call as a JSON line on stderr.
func runLendStdio() {
	l := lend(&testing.B{}, os.Getenv("IOH_MCP_SERVE"), func(s mcp.Served) {
		b, _ := json.Marshal(s)
		fmt.Fprintf(os.Stderr, "served %s\n", b)
	})
	if err := l.ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// checkLent drives the lent tools through a client connected as server
// "ws".
func checkLent(t *testing.T, c *mcp.Client, root string) {
	t.Helper()
	if n := len(c.Tools()); n != 7 {
		t.Errorf("%d tools; want the 7 workspace tools", n)
	}
	r := call(t, find(t, c, "mcp__ws__write_file"), `{"path":"a.txt","content":"lent"}`)
	if r.IsError {
		t.Fatalf("write_file: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(b) != "lent" {
		t.Errorf("a.txt holds %q", b)
	}
	if r := call(t, find(t, c, "mcp__ws__read_file"), `{"path":"a.txt"}`); !strings.Contains(r.Output, "lent") {
		t.Errorf("read_file: %+v", r)
	}
	// Refused by the policy: the client sees the refusal.
	r = call(t, find(t, c, "mcp__ws__write_file"), `{"path":"secret/key","content":"x"}`)
	if !r.IsError || !strings.Contains(r.Output, "[refused]") || !strings.Contains(r.Output, `"secret/**"`) {
		t.Errorf("a write the policy denies: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(root, "secret")); err == nil {
		t.Errorf("the denied write happened")
	}
	// Outside the workspace: refused.
	r = call(t, find(t, c, "mcp__ws__read_file"), `{"path":"../../etc/passwd"}`)
	if !r.IsError || !strings.Contains(r.Output, "[refused]") {
		t.Errorf("a read outside the workspace: %+v", r)
	}
	r = call(t, find(t, c, "mcp__ws__exec"), `{"argv":["rm","-rf","a.txt"]}`)
	if !r.IsError || !strings.Contains(r.Output, "[refused]") {
		t.Errorf("an exec the policy denies: %+v", r)
	}
	if !find(t, c, "mcp__ws__read_file").(*mcp.Tool).ReadOnly() || find(t, c, "mcp__ws__write_file").(*mcp.Tool).ReadOnly() ||
		!tool.IsIdempotent(find(t, c, "mcp__ws__write_file")) || tool.IsIdempotent(find(t, c, "mcp__ws__edit_file")) {
		t.Errorf("the annotations are off")
	}
}

// TestLendHTTP: our server over streamable HTTP on loopback, driven by
// our client (mcp-go's client underneath).
func TestLendHTTP(t *testing.T) {
	root := t.TempDir()
	var served []mcp.Served
	done := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := lend(t, root, func(s mcp.Served) { served = append(served, s) })
	go func() { defer close(done); l.ServeHTTP(ctx, ln) }()
	defer func() { cancel(); <-done }()
	srv := mcp.Server{Name: "ws", URL: "http://" + ln.Addr().String() + "/mcp"}
	c := connect(t, mcp.Options{Servers: []mcp.Server{srv}, Gate: gate(allowNet(ln.Addr().String()))})
	checkLent(t, c, root)
	c.Close()
	if len(served) != 5 || served[2].Tool != "write_file" || served[2].Refusal == "" {
		t.Errorf("served: %+v", served)
	}
}

// TestLendStdio: the server on stdio, driven by our client; every call
// is traced (here on the server's stderr, which the client traces).
func TestLendStdio(t *testing.T) {
	root := t.TempDir()
	exe, _ := os.Executable()
	rec := &recorder{}
	srv := mcp.Server{Name: "ws", Command: []string{exe}, Env: map[string]string{"IOH_MCP_SERVE": root}, Host: true,
		CallTimeout: sandbox.Duration(30 * time.Second)}
	c := connect(t, mcp.Options{Servers: []mcp.Server{srv}, Observer: rec.observe})
	checkLent(t, c, root)
	n := 0
	waitFor(5*time.Second, func() bool {
		n = 0
		for _, e := range rec.of(mcp.EventStderr) {
			if strings.HasPrefix(e.Text, "served ") {
				n++
			}
		}
		return n == 5
	})
	if n != 5 {
		t.Errorf("%d calls traced; want 5", n)
	}
}

// TestLendInspector: the official inspector CLI lists and calls our
// server's tools, and sees the policy's refusal.
func TestLendInspector(t *testing.T) {
	js := npmPackage(t, "@modelcontextprotocol/inspector-cli/build/index.js")
	node, _ := lookNode()
	root := t.TempDir()
	exe, _ := os.Executable()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(node, append([]string{js, exe, "--transport", "stdio"}, args...)...)
		// The CLI looks for ../package.json from its working directory.
		cmd.Dir = filepath.Dir(js)
		cmd.Env = append(os.Environ(), "IOH_MCP_SERVE="+root)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspector %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	out := run("--method", "tools/list")
	for _, name := range []string{"read_file", "write_file", "edit_file", "list_dir", "grep", "find", "exec"} {
		if !strings.Contains(out, `"name": "`+name+`"`) {
			t.Errorf("tools/list has no %s:\n%s", name, out)
		}
	}
	out = run("--method", "tools/call", "--tool-name", "write_file", "--tool-arg", "path=ok.txt", "--tool-arg", "content=hi")
	if strings.Contains(out, `"isError": true`) {
		t.Errorf("write_file ok.txt: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "ok.txt")); string(b) != "hi" {
		t.Errorf("ok.txt holds %q", b)
	}
	out = run("--method", "tools/call", "--tool-name", "write_file", "--tool-arg", "path=secret/k", "--tool-arg", "content=x")
	if !strings.Contains(out, `"isError": true`) || !strings.Contains(out, "[refused]") {
		t.Errorf("write_file secret/k: %s", out)
	}
}
