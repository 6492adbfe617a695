package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mcpNPM is where make deps installs the MCP servers from npm: the
// Makefile's MCP_NPM, overridden by IOH_MCP_NPM.
func mcpNPM() string {
	if d := os.Getenv("IOH_MCP_NPM"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/cache/io-harness/npm/mcp"
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "io-harness", "npm", "mcp")
}

// TestMCPTools lists a spec's servers: a host the policy denies is listed
// as not connected (exit 1); with server-everything installed, its tools
// are listed with the policy's verdict on each.
func TestMCPTools(t *testing.T) {
	dir := t.TempDir()
	servers := []any{map[string]any{"name": "web", "url": "http://127.0.0.1:9/mcp"}}
	js := filepath.Join(mcpNPM(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, nodeErr := exec.LookPath("node")
	_, jsErr := os.Stat(js)
	everything := nodeErr == nil && jsErr == nil
	if everything {
		servers = append(servers, map[string]any{"name": "everything", "command": []string{node, js, "stdio"}, "host": true})
	} else {
		t.Logf("server-everything is not installed (make deps): only the refused server is listed")
	}
	spec := writeJSON(t, filepath.Join(dir, "spec.json"), map[string]any{
		"task": map[string]any{"goal": "x", "root": dir},
		"policy": map[string]any{"version": 1, "defaults": map[string]string{"read": "allow", "write": "allow", "exec": "allow", "net": "deny"},
			"layers": []any{map[string]any{"name": "project", "rules": []any{
				map[string]string{"act": "exec", "effect": "deny", "pattern": "mcp__everything__get-sum"}}}}},
		"mcp_servers": servers,
	})
	r := cli(t, dir, "", "mcp", "tools", spec)
	if r.code != 1 || !strings.Contains(r.stdout, "web (http): not connected: mcp: server web: net 127.0.0.1:9: the policy's net default is deny") {
		t.Errorf("mcp tools: %s", r)
	}
	if everything {
		if !regexpMatch(`mcp__everything__get-sum +deny \(rule "mcp__everything__get-sum", layer "project"\)`, r.stdout) ||
			!regexpMatch(`mcp__everything__echo +allow +read-only`, r.stdout) {
			t.Errorf("mcp tools: %s", r)
		}
		r = cli(t, dir, "", "mcp", "tools", spec, "--json")
		var entries []struct {
			Server string `json:"server"`
			Tools  []struct {
				Name    string `json:"name"`
				Verdict struct {
					Effect string `json:"effect"`
				} `json:"verdict"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) != 2 || len(entries[1].Tools) < 10 {
			t.Errorf("mcp tools --json: %v: %s", err, r)
		}
	}
	// A bad server configuration is a usage error naming the field.
	bad := writeJSON(t, filepath.Join(dir, "bad.json"), map[string]any{"mcp_servers": []any{map[string]any{"name": "x", "command": []string{"a"}, "bogus": 1}}})
	if r := cli(t, dir, "", "mcp", "tools", bad); r.code != 1 || !strings.Contains(r.stderr, `mcp_servers: json: unknown field "bogus"`) {
		t.Errorf("a bad spec: %s", r)
	}
}

// TestMCPServe speaks MCP to io-harness mcp serve over stdio: the
// workspace tools are listed, a write lands, a write the policy denies is
// refused, and every call is traced on stderr.
func TestMCPServe(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	spec := writeJSON(t, filepath.Join(dir, "spec.json"), map[string]any{
		"task": map[string]any{"goal": "x", "root": ws},
		"policy": map[string]any{"version": 1, "defaults": map[string]string{"read": "allow", "write": "allow", "exec": "deny", "net": "deny"},
			"layers": []any{map[string]any{"name": "project", "rules": []any{
				map[string]string{"act": "write", "effect": "deny", "pattern": "secret/**"}}}}},
	})
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt","content":"hi"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"secret/k","content":"x"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["true"]}}}`,
	}
	cmd := exec.Command(bin, "mcp", "serve", spec)
	cmd.Dir = dir
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answers := map[float64]map[string]any{}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for _, m := range msgs {
		in.Write([]byte(m + "\n"))
		if !strings.Contains(m, `"id"`) {
			continue
		}
		if !sc.Scan() {
			t.Fatalf("no answer to %s; stderr: %s", m, stderr.String())
		}
		var a map[string]any
		json.Unmarshal(sc.Bytes(), &a)
		id, _ := a["id"].(float64)
		answers[id] = a
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("mcp serve: %v; stderr: %s", err, stderr.String())
	}
	text := func(id float64) string { b, _ := json.Marshal(answers[id]); return string(b) }
	for _, name := range []string{"read_file", "write_file", "edit_file", "list_dir", "grep", "find", "exec"} {
		if !strings.Contains(text(2), `"name":"`+name+`"`) {
			t.Errorf("tools/list has no %s: %s", name, text(2))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "hi" || strings.Contains(text(3), `"isError":true`) {
		t.Errorf("write a.txt: %s (the file holds %q)", text(3), b)
	}
	if !strings.Contains(text(4), `"isError":true`) || !strings.Contains(text(4), "[refused]") {
		t.Errorf("write secret/k: %s", text(4))
	}
	if !strings.Contains(text(5), `"isError":true`) || !strings.Contains(text(5), "[refused]") {
		t.Errorf("exec denied by the default: %s", text(5))
	}
	if n := strings.Count(stderr.String(), `"kind":"call"`); n != 3 {
		t.Errorf("%d calls traced on stderr; want 3:\n%s", n, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"decision":"refused"`) {
		t.Errorf("no refusal traced:\n%s", stderr.String())
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
