package mcp

import (
	"context"
	"fmt"
	"os"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// PolicyGate is a minimal [tool.Gate] for the CLI and the server when no
// run supplies one: the policy's verdicts, a path judged in its literal
// form and through its links (the stricter wins), an exec of a command
// judged by every program it starts, and an ask sent to Ask (nil denies
// it). It does not rewrite, defer or remember. The harness's own gate
// (pkg/harness/gate.go) does all of that; a run passes that one instead.
type PolicyGate struct {
	// Policy is the permission boundary.
	Policy policy.Policy
	// Root is the workspace, for judging paths through their links; nil
	// judges them as given.
	Root *os.Root
	// Programs resolves bare program names; nil means the default PATH.
	Programs *tool.Programs
	// Ask decides an action the policy asks about; nil denies it.
	Ask func(ctx context.Context, a tool.Action, v policy.Verdict) (approved bool, reason string)
	// Observer receives every verdict Authorize reaches, with its
	// decision: allowed, refused, approved or denied.
	Observer func(v policy.Verdict, decision string)
}

var _ tool.Gate = (*PolicyGate)(nil)

// Peek implements tool.Gate.
func (g *PolicyGate) Peek(act policy.Act, target string) policy.Verdict {
	return g.explain(tool.Action{Act: act, Target: target})
}

func (g *PolicyGate) explain(a tool.Action) policy.Verdict {
	if a.Act == policy.Exec && a.Argv != nil {
		return g.Policy.ExplainArgv(a.Argv, g.Programs.Resolve)
	}
	v := g.Policy.Explain(a.Act, a.Target)
	if g.Root == nil || a.Act != policy.Read && a.Act != policy.Write {
		return v
	}
	canon, err := tool.Canonical(g.Root, a.Target)
	switch {
	case err != nil && tool.IsEscape(err):
		return policy.Verdict{Act: a.Act, Target: a.Target, Effect: policy.Deny, Rule: "<resolves outside the workspace>", Layer: "builtin-root"}
	case err != nil || canon == a.Target:
		return v
	}
	if c := g.Policy.Explain(a.Act, canon); policy.Stricter(v.Effect, c.Effect) != v.Effect {
		c.Target = a.Target
		return c
	}
	return v
}

// Authorize implements tool.Gate.
func (g *PolicyGate) Authorize(ctx context.Context, a tool.Action) tool.Verdict {
	v := g.explain(a)
	note := func(d string) {
		if g.Observer != nil {
			g.Observer(v, d)
		}
	}
	switch v.Effect {
	case policy.Allow:
		note("allowed")
		return tool.Verdict{Action: a}
	case policy.Deny:
		note("refused")
		return tool.Verdict{Refused: refusal(v)}
	}
	if g.Ask == nil {
		note("denied")
		return tool.Verdict{Refused: "the policy asks (" + refusal(v) + "), and no approver is configured"}
	}
	ok, reason := g.Ask(ctx, a, v)
	if !ok {
		note("denied")
		return tool.Verdict{Refused: "denied by the approver: " + reason}
	}
	note("approved")
	return tool.Verdict{Action: a}
}

// refusal says why an action is refused, naming the rule and layer.
func refusal(v policy.Verdict) string {
	if v.Rule == "" {
		return fmt.Sprintf("the policy's %s default is %s", v.Act, v.Effect)
	}
	return fmt.Sprintf("%s by rule %q in layer %q", v.Effect, v.Rule, v.Layer)
}
