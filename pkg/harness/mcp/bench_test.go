package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// BenchmarkStdioCall measures a call of an MCP tool over stdio against
// the same tool built in: read_file of a small file, called directly, and
// called through our client on our own server (the test binary serving
// the same workspace), interleaved in the same run. It reports both per
// call and their ratio.
func BenchmarkStdioCall(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "main.go"), []byte(strings.Repeat("package main // a line\n", 40)), 0o644); err != nil {
		b.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	env := &tool.Env{Root: r}
	var builtin tool.Tool
	for _, t := range tool.Workspace() {
		if t.Spec().Name == "read_file" {
			builtin = t
		}
	}
	exe, _ := os.Executable()
	ctx := context.Background()
	c, err := mcp.Connect(ctx, mcp.Options{Servers: []mcp.Server{{Name: "ws", Command: []string{exe},
		Env: map[string]string{"IOH_MCP_SERVE": root}, Host: true}}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var remote tool.Tool
	for _, t := range c.Tools() {
		if t.Spec().Name == "mcp__ws__read_file" {
			remote = t
		}
	}
	args := []byte(`{"path":"main.go"}`)
	want := builtin.Call(ctx, env, args).Output
	if got := remote.Call(ctx, env, args).Output; got != want {
		b.Fatalf("the MCP call read %q; the built-in %q", got, want)
	}
	var tBuiltin, tMCP time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		builtin.Call(ctx, env, args)
		mid := time.Now()
		remote.Call(ctx, env, args)
		tMCP += time.Since(mid)
		tBuiltin += mid.Sub(start)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(per(tBuiltin), "builtin-µs/call")
	b.ReportMetric(per(tMCP), "mcp-stdio-µs/call")
	b.ReportMetric(float64(tMCP)/float64(tBuiltin), "mcp/builtin")
}
