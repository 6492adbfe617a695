package harness

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// connectMCP connects the run's MCP servers and offers their tools. A
// stdio server starts in the run's sandbox (its egress allowed only to
// the hosts the net policy allows); starting it and reaching an HTTP
// server are judged by the policy. A server the policy refuses is
// ErrRefused; one that cannot be started or reached is ErrMCP, naming it.
func (r *runner) connectMCP(ctx context.Context) error {
	if len(r.opts.MCPServers) == 0 || r.task.SingleFile() {
		return nil
	}
	// The native backend is chosen now, so that a contained server's
	// connect names the backend it runs in.
	for _, s := range r.opts.MCPServers {
		if len(s.Command) > 0 && !s.Host {
			if _, err := r.sb.backend(ctx, ""); err != nil {
				return &Error{Kind: ErrSandbox, Message: "the sandbox of MCP server " + s.Name, Err: err}
			}
			break
		}
	}
	launcher := &mcp.SandboxLauncher{Sandbox: r.sb}
	if r.policy != nil {
		launcher.Network = sandbox.Network{Allow: mcp.NetAllow(*r.policy)}
	}
	opts := mcp.Options{Servers: r.opts.MCPServers, Launcher: launcher, Getenv: r.opts.LookupEnv,
		Path: r.env.Programs.Path(), Observer: func(e mcp.Event) { r.emit(Event{Kind: EventMCP, Step: r.cur, MCP: &e}) },
		Elicit: r.elicit}
	if r.policy != nil {
		opts.Gate = &callGate{r: r, call: provider.ToolCall{Name: "mcp"}}
	}
	c, err := mcp.Connect(ctx, opts)
	if err != nil {
		if errors.Is(err, mcp.ErrRefused) {
			return &Error{Kind: ErrRefused, Message: "an MCP server", Err: err}
		}
		return &Error{Kind: ErrMCP, Message: "an MCP server", Err: err}
	}
	r.mcp = c
	r.addMCPTools()
	return nil
}

// addMCPTools offers the servers' tools beside the others.
func (r *runner) addMCPTools() {
	for _, t := range r.mcp.Tools() {
		s := t.Spec()
		if _, ok := r.tools[s.Name]; !ok {
			r.specs = append(r.specs, s)
		}
		r.tools[s.Name] = t
	}
}

// refreshMCP takes, at a step's start, the tool lists servers said had
// changed: tools that went away are no longer offered.
func (r *runner) refreshMCP(ctx context.Context) {
	if r.mcp == nil || !r.mcp.Refresh(ctx) {
		return
	}
	keep := r.specs[:0]
	for _, s := range r.specs {
		if _, isMCP := r.tools[s.Name].(*mcp.Tool); isMCP {
			delete(r.tools, s.Name)
			continue
		}
		keep = append(keep, s)
	}
	r.specs = keep
	r.addMCPTools()
}

// elicit sends a server's request for information to the approval gate as
// an ask: a person who approves accepts it with the content they give.
func (r *runner) elicit(ctx context.Context, e mcp.Elicitation) (mcp.ElicitationResult, error) {
	a := tool.Action{Act: policy.Exec, Target: "mcp__" + e.Server + "__elicitation", Content: e.Message + "\n" + string(e.Schema)}
	v := policy.Verdict{Act: policy.Exec, Target: a.Target, Effect: policy.Ask}
	d, err := r.ask(ctx, r.cur, provider.ToolCall{Name: a.Target}, a, v)
	if err != nil || d.Kind != approve.Approve {
		return mcp.ElicitationResult{Action: mcp.ElicitDecline}, nil
	}
	// The person's answer is the rewritten content: a JSON object that
	// matches the server's schema.
	var content map[string]any
	if d.Rewrite != nil && d.Rewrite.Content != nil {
		if err := json.Unmarshal([]byte(*d.Rewrite.Content), &content); err != nil {
			return mcp.ElicitationResult{Action: mcp.ElicitDecline}, nil
		}
	}
	return mcp.ElicitationResult{Action: mcp.ElicitAccept, Content: content}, nil
}
