package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"text/tabwriter"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

const mcpUsage = `Usage:
  io-harness mcp tools SPEC.json [--json]
  io-harness mcp serve SPEC.json [--http 127.0.0.1:PORT] [--trace FILE]

tools connects each server of the spec's mcp_servers as a run would (a
stdio server in the sandbox unless it says host: true, each start and host
judged by the spec's policy) and lists its tools as the agent would see
them, with the policy's verdict on calling each. A server that cannot be
connected is listed with the reason; the exit code is then 1.

serve lends the workspace tools (read_file, write_file, edit_file,
list_dir, grep, find and the sandboxed exec) over the spec's task.root to
another agent, as an MCP server on stdio, or with --http on streamable
HTTP at http://ADDR/mcp (a loopback address only). Every call goes through
the spec's policy (without one, the default policy) and the sandbox; an
action the policy asks about is denied, as there is no one to ask. Each
call is traced as a JSON line on stderr, or to --trace FILE.`

// mcpSpec is the part of a run spec these commands read. The rest of the
// spec is not checked here; a run checks it.
type mcpSpec struct {
	Task struct {
		Root string `json:"root"`
	} `json:"task"`
	Policy     *policy.Policy   `json:"policy"`
	Sandbox    *sandbox.Options `json:"sandbox"`
	MCPServers json.RawMessage  `json:"mcp_servers"`
}

func (e *env) mcpCmd(args []string) int {
	if len(args) == 0 {
		return usageError(e.flags("mcp", mcpUsage), "want tools or serve")
	}
	switch args[0] {
	case "tools":
		return e.mcpTools(args[1:])
	case "serve":
		return e.mcpServe(args[1:])
	case "-h", "-help", "--help":
		fmt.Fprintln(e.stdout, mcpUsage)
		fmt.Fprint(e.stdout, "\n"+exitTable)
		return exitOK
	}
	return usageError(e.flags("mcp", mcpUsage), "unknown subcommand %q", args[0])
}

// readMCPSpec reads and checks the parts of a spec the mcp commands use.
func readMCPSpec(path string) (*mcpSpec, []mcp.Server, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var s mcpSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, nil, fmt.Errorf("the spec is not valid JSON: %v", err)
	}
	if s.Policy != nil {
		if err := s.Policy.Validate(); err != nil {
			return nil, nil, err
		}
	}
	var servers []mcp.Server
	if len(s.MCPServers) > 0 && string(s.MCPServers) != "null" {
		if servers, err = mcp.ParseServers(s.MCPServers); err != nil {
			return nil, nil, err
		}
	}
	return &s, servers, nil
}

// mcpEntry is one server in the --json output of mcp tools.
type mcpEntry struct {
	Server    string    `json:"server"`
	Transport string    `json:"transport"`
	Protocol  string    `json:"protocol,omitempty"`
	Backend   string    `json:"backend,omitempty"`
	Error     string    `json:"error,omitempty"`
	Notes     []string  `json:"notes,omitempty"`
	Tools     []mcpTool `json:"tools,omitempty"`
}

type mcpTool struct {
	Name        string         `json:"name"`
	Remote      string         `json:"remote"`
	Description string         `json:"description"`
	ReadOnly    bool           `json:"read_only,omitempty"`
	Idempotent  bool           `json:"idempotent,omitempty"`
	Verdict     policy.Verdict `json:"verdict"`
}

func (e *env) mcpTools(args []string) int {
	fs := e.flags("mcp tools", mcpUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, "want SPEC.json, got %d arguments", len(pos))
	}
	spec, servers, err := readMCPSpec(pos[0])
	if err != nil {
		return e.fail("read the spec", err)
	}
	pol := policy.Permissive()
	if spec.Policy != nil {
		pol = *spec.Policy
	}
	var launcher mcp.Launcher
	for _, s := range servers {
		if len(s.Command) > 0 && !s.Host {
			sb, err := sandbox.New(e.ctx, spec.Sandbox)
			if err != nil {
				return e.fail("make the sandbox", err)
			}
			launcher = &mcp.SandboxLauncher{Sandbox: sb}
			break
		}
	}
	var entries []mcpEntry
	failed := false
	for _, s := range servers {
		ent := mcpEntry{Server: s.Name, Transport: s.Transport()}
		// One server at a time: one that is refused hides no other.
		c, err := mcp.Connect(e.ctx, mcp.Options{Servers: []mcp.Server{s}, Launcher: launcher,
			Gate: &mcp.PolicyGate{Policy: pol}, Getenv: os.LookupEnv})
		if err != nil {
			ent.Error, failed = err.Error(), true
			entries = append(entries, ent)
			continue
		}
		info := c.Servers()[0]
		ent.Protocol, ent.Backend, ent.Notes = info.Protocol, info.Backend, info.Notes
		for _, t := range info.Tools {
			ent.Tools = append(ent.Tools, mcpTool{Name: t.Name(), Remote: t.Remote(), Description: t.Spec().Description,
				ReadOnly: t.ReadOnly(), Idempotent: t.Idempotent(), Verdict: pol.Explain(policy.Exec, t.Name())})
		}
		c.Close()
		entries = append(entries, ent)
	}
	if *asJSON {
		e.printJSON(entries)
	} else {
		if len(entries) == 0 {
			fmt.Fprintln(e.stdout, "the spec has no mcp_servers")
		}
		for _, ent := range entries {
			if ent.Error != "" {
				fmt.Fprintf(e.stdout, "%s (%s): not connected: %s\n", ent.Server, ent.Transport, ent.Error)
				continue
			}
			where := ent.Backend
			if where == "" {
				where = "remote"
			}
			fmt.Fprintf(e.stdout, "%s (%s, protocol %s, runs on %s): %d tools\n", ent.Server, ent.Transport, ent.Protocol, where, len(ent.Tools))
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			for _, t := range ent.Tools {
				v := string(t.Verdict.Effect)
				if t.Verdict.Rule != "" {
					v += fmt.Sprintf(" (rule %q, layer %q)", t.Verdict.Rule, t.Verdict.Layer)
				}
				kind := "effects"
				switch {
				case t.ReadOnly:
					kind = "read-only"
				case t.Idempotent:
					kind = "idempotent"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.Name, v, kind, oneLine(t.Description, 60))
			}
			tw.Flush()
			for _, n := range ent.Notes {
				fmt.Fprintf(e.stdout, "  note: %s\n", n)
			}
		}
	}
	if failed {
		return exitError
	}
	return exitOK
}

func (e *env) mcpServe(args []string) int {
	fs := e.flags("mcp serve", mcpUsage)
	addr := fs.String("http", "", "serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8808) instead of stdio")
	tracePath := fs.String("trace", "", "append the trace (one JSON line per call) to this file instead of stderr")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, "want SPEC.json, got %d arguments", len(pos))
	}
	spec, _, err := readMCPSpec(pos[0])
	if err != nil {
		return e.fail("read the spec", err)
	}
	if spec.Task.Root == "" {
		return e.fail("read the spec", errors.New("task.root: the server lends one workspace; set the task's root"))
	}
	rootDir := spec.Task.Root
	if !filepath.IsAbs(rootDir) {
		rootDir = filepath.Join(filepath.Dir(pos[0]), rootDir)
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return e.fail("open the workspace", err)
	}
	defer root.Close()
	pol := policy.Default()
	if spec.Policy != nil {
		pol = *spec.Policy
	}
	sb, err := sandbox.New(e.ctx, spec.Sandbox)
	if err != nil {
		return e.fail("make the sandbox", err)
	}
	trace := e.stderr
	if *tracePath != "" {
		f, err := os.OpenFile(*tracePath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return e.fail("open the trace", err)
		}
		defer f.Close()
		trace = f
	}
	var mu sync.Mutex
	line := func(v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		fmt.Fprintf(trace, "%s\n", b)
		mu.Unlock()
	}
	gate := &mcp.PolicyGate{Policy: pol, Root: root,
		Observer: func(v policy.Verdict, d string) { line(map[string]any{"kind": "policy", "verdict": v, "decision": d}) }}
	lend := &mcp.Lend{Env: &tool.Env{Root: root, Gate: gate, Sandbox: sb},
		Observer: func(s mcp.Served) { line(map[string]any{"kind": "call", "call": s}) }}
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt)
	defer stop()
	line(map[string]any{"kind": "serve", "root": rootDir, "sandbox": sb.Name(), "http": *addr})
	if *addr == "" {
		if err := lend.ServeStdio(ctx, e.stdin, e.stdout); err != nil {
			return e.fail("serve", err)
		}
		return exitOK
	}
	if err := loopback(*addr); err != nil {
		return usageError(fs, "--http %s: %v", *addr, err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return e.fail("listen", err)
	}
	fmt.Fprintf(e.stdout, "serving http://%s/mcp\n", ln.Addr())
	if err := lend.ServeHTTP(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		return e.fail("serve", err)
	}
	return exitOK
}

// loopback checks that addr is a loopback address and port.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.IsLoopback() {
		return fmt.Errorf("want a loopback address such as 127.0.0.1:8808: the server lends a sandboxed exec")
	}
	return nil
}
