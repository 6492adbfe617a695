package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv("IOH_MCP_FAKE") != "":
		runFakeServer()
		return
	case os.Getenv("IOH_MCP_SERVE") != "":
		runLendStdio()
		return
	case os.Getenv("IOH_MCP_CONFORMANCE") != "":
		runConformanceClient()
		return
	}
	code := m.Run()
	if shared != "" {
		os.RemoveAll(filepath.Dir(shared))
	}
	os.Exit(code)
}

// shared is a copy of this test binary that any user can run, made when
// the tests run as root: a root caller's sandbox runs servers as an
// unprivileged user, who cannot reach the build directory (mode 0700).
var shared string

// serverExe is the program of the fake server: this test binary, or its
// shared copy when the sandbox will run it as another user.
func serverExe() string {
	exe, _ := os.Executable()
	if os.Geteuid() != 0 {
		return exe
	}
	if shared == "" {
		dir, err := os.MkdirTemp("", "io-harness-mcp-test-")
		if err != nil {
			return exe
		}
		data, err := os.ReadFile(exe)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "mcp.test"), data, 0o755)
		}
		if err != nil || os.Chmod(dir, 0o755) != nil {
			os.RemoveAll(dir)
			return exe
		}
		shared = filepath.Join(dir, "mcp.test")
	}
	return shared
}

// fake configures the fake server (this test binary) on the host.
func fake(name string, env ...string) mcp.Server {
	e := map[string]string{"IOH_MCP_FAKE": "1"}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		e[k] = v
	}
	return mcp.Server{Name: name, Command: []string{serverExe()}, Env: e, Host: true,
		StartTimeout: sandbox.Duration(10 * time.Second), CallTimeout: sandbox.Duration(2 * time.Second)}
}

// recorder keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []mcp.Event
}

func (r *recorder) observe(e mcp.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) of(kind mcp.EventKind) []mcp.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []mcp.Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// connect connects opts, failing the test on an error, and closes the
// client at the end.
func connect(t *testing.T, opts mcp.Options) *mcp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := mcp.Connect(ctx, opts)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// find returns the tool named name.
func find(t *testing.T, c *mcp.Client, name string) tool.Tool {
	t.Helper()
	for _, tl := range c.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	var names []string
	for _, tl := range c.Tools() {
		names = append(names, tl.Spec().Name)
	}
	t.Fatalf("no tool %s; the tools are %v", name, names)
	return nil
}

func call(t *testing.T, tl tool.Tool, args string) tool.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return tl.Call(ctx, &tool.Env{}, []byte(args))
}

// gate is a PolicyGate over p whose asks are denied.
func gate(p policy.Policy) *mcp.PolicyGate { return &mcp.PolicyGate{Policy: p} }

// npmDir is where make deps installs the npm packages the tests use.
func npmDir() string {
	if d := os.Getenv("IOH_MCP_NPM"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		// Where a sandbox's unprivileged user can run them (see Makefile).
		return "/var/cache/io-harness/npm/mcp"
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "io-harness", "npm", "mcp")
}

// npmPackage returns the path of an installed npm package's file, or
// skips the test saying how to install it.
func npmPackage(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(npmDir(), "node_modules", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed (make deps installs it into %s): %v", rel, npmDir(), err)
	}
	if _, err := lookNode(); err != nil {
		t.Skipf("no node: %v", err)
	}
	return p
}

func lookNode() (string, error) { return execLookPath("node") }
