package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// Lend serves tools to other agents as an MCP server: the harness's
// workspace tools (read, write, edit, list, grep, find and the sandboxed
// exec) over one workspace, through one gate and one sandbox. Every call
// goes through the tools themselves, so nothing outside the workspace,
// the policy and the sandbox is reachable through it.
type Lend struct {
	// Env is what every call acts on: the workspace root, the gate (the
	// policy and its approver) and the sandbox. Required, with its Root.
	Env *tool.Env
	// Tools are the tools served; nil means tool.Workspace().
	Tools []tool.Tool
	// Observer receives every call when it ends. It must be safe for
	// concurrent use.
	Observer func(Served)
	// Name is the server's name in the handshake; empty means
	// "io-harness".
	Name string
}

// Served is one call a client made, as the trace records it.
type Served struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Refusal   string          `json:"refusal,omitempty"`
	// Output is the observation, cut to 2 KiB.
	Output    string    `json:"output"`
	LatencyMS int64     `json:"latency_ms"`
	At        time.Time `json:"at"`
}

// ErrNoWorkspace is returned by Lend's methods when Env or Env.Root is
// missing.
var ErrNoWorkspace = errors.New("mcp: the server has no workspace to lend")

// mcpServer builds the SDK's server over l's tools.
func (l *Lend) mcpServer() (*server.MCPServer, error) {
	if l.Env == nil || l.Env.Root == nil {
		return nil, ErrNoWorkspace
	}
	name := l.Name
	if name == "" {
		name = "io-harness"
	}
	s := server.NewMCPServer(name, "1", server.WithToolCapabilities(false), server.WithRecovery(),
		server.WithLogger(quiet))
	tools := l.Tools
	if tools == nil {
		tools = tool.Workspace()
	}
	for _, t := range tools {
		spec := t.Spec()
		ro, idem := readOnly[spec.Name], tool.IsIdempotent(t)
		mt := mcp.Tool{Name: spec.Name, Description: spec.Description, RawInputSchema: spec.Parameters}
		mt.Annotations.ReadOnlyHint = &ro
		mt.Annotations.IdempotentHint = &idem
		s.AddTool(mt, l.handler(t))
	}
	return s, nil
}

// readOnly are the workspace tools that change nothing.
var readOnly = map[string]bool{"read_file": true, "list_dir": true, "grep": true, "find": true}

// servedPreview bounds Served.Output.
const servedPreview = 2 << 10

func (l *Lend) handler(t tool.Tool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started := time.Now()
		args, err := json.Marshal(req.Params.Arguments)
		if err != nil || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		env := *l.Env
		r := t.Call(ctx, &env, args)
		if l.Observer != nil {
			l.Observer(Served{Tool: t.Spec().Name, Arguments: args, IsError: r.IsError, Refusal: r.Refusal,
				Output: cut(r.Output, servedPreview), LatencyMS: time.Since(started).Milliseconds(), At: time.Now()})
		}
		res := mcp.NewToolResultText(r.Output)
		res.IsError = r.IsError
		return res, nil
	}
}

// ServeStdio serves one client over in and out until in ends or ctx is
// done.
func (l *Lend) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s, err := l.mcpServer()
	if err != nil {
		return err
	}
	err = server.NewStdioServer(s).Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// ServeHTTP serves streamable HTTP at /mcp on ln until ctx is done. The
// SDK's DNS-rebinding protection is on: on a loopback listener, a request
// whose Host header is not a loopback name is refused.
func (l *Lend) ServeHTTP(ctx context.Context, ln net.Listener) error {
	s, err := l.mcpServer()
	if err != nil {
		return err
	}
	h := server.NewStreamableHTTPServer(s, server.WithEndpointPath("/mcp"), server.WithStreamableHTTPLogger(quiet))
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.Shutdown(sctx)
	hs.Shutdown(sctx)
	<-done
	return nil
}
