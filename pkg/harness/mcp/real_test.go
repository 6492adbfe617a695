package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Tests against real servers from npm. They skip, saying so, when the
// packages are not installed; make deps installs them.

func everythingStdio(t *testing.T, name string) mcp.Server {
	js := npmPackage(t, "@modelcontextprotocol/server-everything/dist/index.js")
	node, _ := lookNode()
	return mcp.Server{Name: name, Command: []string{node, js, "stdio"}, Host: true,
		StartTimeout: sandbox.Duration(60 * time.Second), CallTimeout: sandbox.Duration(30 * time.Second)}
}

// everythingHTTP starts server-everything over streamable HTTP on a
// loopback port and returns its URL.
func everythingHTTP(t *testing.T) string {
	js := npmPackage(t, "@modelcontextprotocol/server-everything/dist/index.js")
	node, _ := lookNode()
	shim, _ := filepath.Abs("testdata/loopback.cjs")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, "--require", shim, js, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if !waitFor(30*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("server-everything did not listen on %s", addr)
	}
	return "http://" + addr + "/mcp"
}

// allowNet is a permissive policy that allows net to exactly hostPort,
// and denies everything else on the net.
func allowNet(hostPort string) policy.Policy {
	p := policy.Permissive()
	p.Defaults.Net = policy.Deny
	p.Layers = []policy.Layer{{Name: "test", Rules: []policy.Rule{{Act: policy.Net, Effect: policy.Allow, Pattern: hostPort}}}}
	return p
}

func checkEverything(t *testing.T, c *mcp.Client, server string) {
	t.Helper()
	r := call(t, find(t, c, "mcp__"+server+"__echo"), `{"message":"hello"}`)
	if r.IsError || r.Output != "Echo: hello" {
		t.Errorf("echo: %+v", r)
	}
	r = call(t, find(t, c, "mcp__"+server+"__get-sum"), `{"a":2,"b":40}`)
	if r.IsError || !strings.Contains(r.Output, "42") {
		t.Errorf("get-sum: %+v", r)
	}
	r = call(t, find(t, c, "mcp__"+server+"__get-tiny-image"), `{}`)
	// The server's image is a real PNG: it passes package media's checks
	// and is shown to the model.
	if r.IsError || !strings.Contains(r.Output, "[image from the tool: image/png, 20×20 pixels") ||
		len(r.Images) != 1 || r.Images[0].MediaType != "image/png" {
		t.Errorf("get-tiny-image: %s (%d images)", r.Output, len(r.Images))
	}
	r = call(t, find(t, c, "mcp__"+server+"__get-structured-content"), `{"location":"New York"}`)
	if r.IsError || !strings.Contains(r.Output, "temperature") {
		t.Errorf("get-structured-content: %+v", r)
	}
	r = call(t, find(t, c, "mcp__"+server+"__get-resource-links"), `{"count":2}`)
	if r.IsError || strings.Count(r.Output, "[resource link: ") != 2 {
		t.Errorf("get-resource-links: %+v", r)
	}
	// A schema-invalid call is a tool error the model sees.
	r = call(t, find(t, c, "mcp__"+server+"__get-sum"), `{"a":"two"}`)
	if !r.IsError {
		t.Errorf("get-sum with a bad argument: %+v", r)
	}
}

func TestEverythingStdio(t *testing.T) {
	rec := &recorder{}
	c := connect(t, mcp.Options{Servers: []mcp.Server{everythingStdio(t, "everything")}, Observer: rec.observe})
	checkEverything(t, c, "everything")
	if e := rec.of(mcp.EventConnect); len(e) != 1 || e[0].Protocol != "2025-11-25" {
		t.Errorf("connect: %+v", e)
	}
}

func TestEverythingHTTP(t *testing.T) {
	url := everythingHTTP(t)
	hostPort := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	rec := &recorder{}
	srv := mcp.Server{Name: "web", URL: url, Headers: map[string]string{"Authorization": "Bearer ${TEST_TOKEN}"}}
	c := connect(t, mcp.Options{Servers: []mcp.Server{srv}, Gate: gate(allowNet(hostPort)), Observer: rec.observe,
		Getenv: func(k string) (string, bool) { return "t0ken", k == "TEST_TOKEN" }})
	checkEverything(t, c, "web")
	if e := rec.of(mcp.EventConnect); len(e) != 1 || e[0].Transport != "http" || e[0].Protocol != "2025-11-25" {
		t.Errorf("connect: %+v", e)
	}
	if v := rec.of(mcp.EventVerdict); len(v) != 1 || v[0].Outcome != "allowed" || v[0].Verdict.Target != hostPort {
		t.Errorf("verdicts: %+v", v)
	}
}

// TestDeniedHost: an HTTP server whose host the policy denies stops
// Connect with ErrRefused before any dial; one the policy allows only by
// a wildcard is refused by the address floor (loopback), since only a
// literal name lifts it. The negative control (the literal allow) is
// TestEverythingHTTP.
func TestDeniedHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialled := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialled <- struct{}{}
			c.Close()
		}
	}()
	hostPort := ln.Addr().String()
	srv := mcp.Server{Name: "web", URL: "http://" + hostPort + "/mcp"}

	deny := allowNet("example.com:443")
	_, err = mcp.Connect(context.Background(), mcp.Options{Servers: []mcp.Server{srv}, Gate: gate(deny)})
	var me *mcp.Error
	if !errors.Is(err, mcp.ErrRefused) || !errors.As(err, &me) || me.Server != "web" || !strings.Contains(err.Error(), "net "+hostPort) {
		t.Errorf("a denied host: %v; want ErrRefused naming web and %s", err, hostPort)
	}
	wild := allowNet("*")
	_, err = mcp.Connect(context.Background(), mcp.Options{Servers: []mcp.Server{srv}, Gate: gate(wild)})
	if !errors.Is(err, mcp.ErrRefused) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a loopback host allowed by a wildcard: %v; want ErrRefused by the floor", err)
	}
	select {
	case <-dialled:
		t.Errorf("a refused host was dialled")
	default:
	}
}

func TestFilesystemStdio(t *testing.T) {
	js := npmPackage(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	node, _ := lookNode()
	dir := t.TempDir()
	outside := t.TempDir()
	srv := mcp.Server{Name: "files", Command: []string{node, js, dir}, Host: true,
		StartTimeout: sandbox.Duration(60 * time.Second), CallTimeout: sandbox.Duration(30 * time.Second)}
	c := connect(t, mcp.Options{Servers: []mcp.Server{srv}})
	p := filepath.Join(dir, "note.txt")
	r := call(t, find(t, c, "mcp__files__write_file"), fmt.Sprintf(`{"path":%q,"content":"from the agent"}`, p))
	if r.IsError {
		t.Fatalf("write_file: %+v", r)
	}
	if b, _ := os.ReadFile(p); string(b) != "from the agent" {
		t.Errorf("the file holds %q", b)
	}
	r = call(t, find(t, c, "mcp__files__read_text_file"), fmt.Sprintf(`{"path":%q}`, p))
	if r.IsError || r.Output != "from the agent" {
		t.Errorf("read_text_file: %+v", r)
	}
	r = call(t, find(t, c, "mcp__files__write_file"), fmt.Sprintf(`{"path":%q,"content":"x"}`, filepath.Join(outside, "x")))
	if !r.IsError || !strings.Contains(r.Output, "Access denied") {
		t.Errorf("a write outside its directories: %+v", r)
	}
	// The server's own write_file is namespaced: it never shadows ours.
	if tool.IsBuiltin("mcp__files__write_file") || !tool.IsIdempotent(find(t, c, "mcp__files__read_text_file")) {
		t.Errorf("names or annotations are off")
	}
}

// TestScriptedAgent runs a real harness run whose scripted model calls
// server-everything's tools beside the built-ins. The policy allows the
// server and denies one of its tools: that call is refused, the model
// sees why, and the run goes on to success.
func TestScriptedAgent(t *testing.T) {
	rec := &recorder{}
	c := connect(t, mcp.Options{Servers: []mcp.Server{everythingStdio(t, "everything")}, Observer: rec.observe})
	model, err := scripted.Parse([]byte(`{"turns": [
		{"tool_calls": [
			{"id": "1", "name": "mcp__everything__echo", "arguments": {"message": "hi"}},
			{"id": "2", "name": "mcp__everything__get-sum", "arguments": {"a": 1, "b": 2}}]},
		{"tool_calls": [{"id": "3", "name": "write_file", "arguments": {"path": "done.txt", "content": "done"}}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := policy.Permissive()
	p.Layers = []policy.Layer{{Name: "project", Rules: []policy.Rule{{Act: policy.Exec, Effect: policy.Deny, Pattern: "mcp__everything__get-sum"}}}}
	results := map[string]harness.Event{}
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "use the tools", Root: t.TempDir(),
		Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "done.txt", Text: "done"}}},
		harness.Options{Provider: model, Tools: c.Tools(), Policy: &p, Observer: func(e harness.Event) {
			if e.Kind == harness.EventToolResult {
				results[e.CallID] = e
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Success {
		t.Fatalf("outcome: %+v", res.Outcome)
	}
	if e := results["1"]; e.IsError || e.Output != "Echo: hi" {
		t.Errorf("echo: %+v", e)
	}
	if e := results["2"]; !e.IsError || !strings.Contains(e.Output, "[refused] exec mcp__everything__get-sum") {
		t.Errorf("get-sum: %+v", e)
	}
	// The refused call never reached the server.
	for _, e := range rec.of(mcp.EventCall) {
		if e.Tool == "mcp__everything__get-sum" {
			t.Errorf("the denied tool was called: %+v", e)
		}
	}
}

// A run given the server in its options connects it itself, in its own
// sandbox (the server does not say host), offers its tools beside the
// built-ins, traces the connect, and denies what the policy denies.
func TestRunWithServers(t *testing.T) {
	srv := everythingStdio(t, "everything")
	srv.Host = false
	model, err := scripted.Parse([]byte(`{"turns": [
		{"tool_calls": [{"id": "1", "name": "mcp__everything__echo", "arguments": {"message": "hi"}},
			{"id": "2", "name": "mcp__everything__get-sum", "arguments": {"a": 1, "b": 2}}]},
		{"tool_calls": [{"id": "3", "name": "write_file", "arguments": {"path": "done.txt", "content": "done"}}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := policy.Permissive()
	p.Layers = []policy.Layer{{Name: "project", Rules: []policy.Rule{{Act: policy.Exec, Effect: policy.Deny, Pattern: "mcp__everything__get-sum"}}}}
	results := map[string]harness.Event{}
	var connect *mcp.Event
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "use the tools", Root: t.TempDir(),
		Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "done.txt", Text: "done"}}},
		harness.Options{Provider: model, MCPServers: []mcp.Server{srv}, Policy: &p, Observer: func(e harness.Event) {
			switch {
			case e.Kind == harness.EventToolResult:
				results[e.CallID] = e
			case e.Kind == harness.EventMCP && e.MCP.Kind == mcp.EventConnect:
				connect = e.MCP
			}
		}})
	if err != nil {
		t.Skipf("the server did not start in this machine's sandbox: %v", err)
	}
	if res.Outcome.Kind != harness.Success {
		t.Fatalf("outcome: %+v", res.Outcome)
	}
	if e := results["1"]; e.IsError || e.Output != "Echo: hi" {
		t.Errorf("echo: %+v", e)
	}
	if e := results["2"]; !e.IsError || !strings.Contains(e.Output, "[refused]") {
		t.Errorf("get-sum: %+v", e)
	}
	if connect == nil || connect.Host || connect.Backend == "" || connect.Backend == "host" {
		t.Errorf("the connect event does not show a contained server: %+v", connect)
	}
}
