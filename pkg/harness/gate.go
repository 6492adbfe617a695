package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// providerLayer is the layer that lets a run reach its own model: an allow
// rule for each provider endpoint. It is merged onto the caller's policy,
// so an explicit deny of a provider's host still wins.
const providerLayer = "provider"

// rememberedLayer holds the rules approvers asked the run to remember.
const rememberedLayer = "remembered"

// endpointer is implemented by providers that dial a network endpoint.
type endpointer interface{ Endpoint() string }

// setPolicy installs the run's policy: base, with the provider layer and
// the remembered rules stacked on it. A run without a policy has no gate.
func (r *runner) setPolicy(base *policy.Policy, remembered []policy.Rule) {
	if base == nil {
		return
	}
	r.base = base
	r.remembered = remembered
	r.rebuildPolicy()
}

func (r *runner) rebuildPolicy() {
	var allow []policy.Rule
	for _, p := range r.providers {
		if e, ok := p.(endpointer); ok && e.Endpoint() != "" {
			allow = append(allow, policy.Rule{Act: policy.Net, Effect: policy.Allow, Pattern: policy.Literal(policy.Net, e.Endpoint())})
		}
	}
	eff := policy.Merge(*r.base, policy.Policy{Defaults: r.base.Defaults, Layers: []policy.Layer{{Name: providerLayer, Rules: allow}}})
	if len(r.remembered) > 0 {
		eff = policy.Merge(eff, policy.Policy{Defaults: r.base.Defaults, Layers: []policy.Layer{{Name: rememberedLayer, Rules: r.remembered}}})
	}
	r.policy = &eff
}

// authorizeProviders checks, before the first request, that the run may
// reach every provider it was given. A deny fails fast; an ask goes to
// the approver, whose answer must be an approval now.
func (r *runner) authorizeProviders(ctx context.Context) error {
	if r.policy == nil {
		return nil
	}
	for _, p := range r.providers {
		e, ok := p.(endpointer)
		if !ok || e.Endpoint() == "" {
			continue
		}
		v := r.policy.Explain(policy.Net, e.Endpoint())
		r.emitVerdict(0, v)
		switch v.Effect {
		case policy.Allow:
			continue
		case policy.Deny:
			return &Error{Kind: ErrRefused, Message: fmt.Sprintf("the policy refuses provider %s: %s", p.Name(), v)}
		}
		a := tool.Action{Act: policy.Net, Target: e.Endpoint()}
		d, err := r.ask(ctx, 0, provider.ToolCall{Name: "provider " + p.Name()}, a, v)
		switch {
		case err != nil:
			return &Error{Kind: ErrRefused, Message: fmt.Sprintf("provider %s: %s", p.Name(), v), Err: err}
		case d.Kind != approve.Approve:
			return &Error{Kind: ErrRefused, Message: fmt.Sprintf("provider %s was not approved (%s): a provider's host cannot wait for a deferred decision", p.Name(), d.Kind)}
		}
	}
	return nil
}

// explain evaluates an action. A path is judged in its literal form and,
// through its symlinks, in the form it really names; the stricter verdict
// wins, so a link cannot carry a write past a rule.
func (r *runner) explain(a tool.Action) policy.Verdict {
	v := r.policy.Explain(a.Act, a.Target)
	if a.Act != policy.Read && a.Act != policy.Write {
		return v
	}
	canon, err := tool.Canonical(r.root, a.Target)
	switch {
	case err != nil && tool.IsEscape(err):
		return policy.Verdict{Act: a.Act, Target: a.Target, Effect: policy.Deny, Rule: "<resolves outside the workspace>", Layer: "builtin-root"}
	case err != nil || canon == a.Target:
		return v
	}
	if c := r.policy.Explain(a.Act, canon); policy.Stricter(v.Effect, c.Effect) != v.Effect {
		c.Target = a.Target
		if c.Rule != "" {
			c.Rule += " (via " + canon + ")"
		}
		return c
	}
	return v
}

func (r *runner) emitVerdict(step int, v policy.Verdict) {
	r.emit(Event{Kind: EventPolicy, Step: step, Act: v.Act, Target: v.Target, Effect: v.Effect, Rule: v.Rule, Layer: v.Layer})
}

// refusal says why an action is refused, naming the rule and layer.
func refusal(v policy.Verdict) string {
	if v.Rule == "" {
		return fmt.Sprintf("the policy's %s default is %s", v.Act, v.Effect)
	}
	return fmt.Sprintf("%s by rule %q in layer %q", v.Effect, v.Rule, v.Layer)
}

// ask sends an action the policy asks about to the approver and records
// the request and the decision. A missing approver, a failed one or an
// invalid decision is a denial.
func (r *runner) ask(ctx context.Context, step int, call provider.ToolCall, a tool.Action, v policy.Verdict) (approve.Decision, error) {
	req := r.approvalRequest(step, call, a, v)
	r.emit(Event{Kind: EventApprovalRequested, Step: step, RequestID: req.ID, Tool: call.Name, CallID: call.ID,
		Act: a.Act, Target: a.Target, Rule: v.Rule, Layer: v.Layer})
	var d approve.Decision
	var err error
	switch {
	case r.opts.Approver == nil:
		d = approve.Decision{Kind: approve.Deny, Reason: "the policy asks, and no approver is configured"}
	default:
		d, err = r.opts.Approver.Decide(ctx, req)
		if err == nil {
			err = d.Validate()
		}
		if err != nil {
			d = approve.Decision{Kind: approve.Deny, Reason: "the approver failed: " + err.Error()}
		}
	}
	r.emit(Event{Kind: EventApprovalResolved, Step: step, RequestID: req.ID, Decision: d.Kind, Reason: d.Reason})
	r.lastRequest = req
	return d, nil
}

// approvalRequest builds the approval request for an action, with what a person
// is shown: for a write, the diff against the file as it is now.
func (r *runner) approvalRequest(step int, call provider.ToolCall, a tool.Action, v policy.Verdict) *approve.Request {
	req := &approve.Request{ID: newRequestID(), RunID: r.runID, Step: step, Tool: call.Name, CallID: call.ID,
		Act: a.Act, Target: a.Target, Content: a.Content, Hash: approve.Hash(a.Act, a.Target, a.Content),
		Rule: v.Rule, Layer: v.Layer}
	if a.Act == policy.Write {
		old := ""
		if data, err := r.root.ReadFile(a.Target); err == nil {
			old = string(data)
		} else if !errors.Is(err, fs.ErrNotExist) {
			old = fmt.Sprintf("(the current content cannot be read: %v)\n", err)
		}
		req.Shown = approve.Diff(a.Target, old, a.Content)
	}
	return req
}

func newRequestID() string {
	var b [10]byte
	rand.Read(b[:])
	return "apr_" + hex.EncodeToString(b[:])
}

// remember adds an approver's rules to the run's remembered layer.
func (r *runner) remember(rules []policy.Rule) {
	changed := false
	for _, rule := range rules {
		if !slices.Contains(r.remembered, rule) {
			r.remembered = append(r.remembered, rule)
			changed = true
		}
	}
	if changed {
		r.rememberedDirty = true
		r.rebuildPolicy()
	}
}

// callGate is the permission boundary of one tool call.
type callGate struct {
	r    *runner
	step int
	call provider.ToolCall

	// expect, when set, is the hash of the one action this gate lets
	// through without asking: an approved action being performed, which
	// the tool must compute again exactly. final is what is performed in
	// its place (the approver's rewrite, or the action itself).
	expect  string
	final   tool.Action
	matched bool

	// deferred is the approval request this call now waits on.
	deferred *store.Approval
}

var _ tool.Gate = (*callGate)(nil)

// Peek implements tool.Gate.
func (g *callGate) Peek(act policy.Act, target string) policy.Effect {
	return g.r.policy.Explain(act, target).Effect
}

// Authorize implements tool.Gate.
func (g *callGate) Authorize(ctx context.Context, a tool.Action) tool.Verdict {
	r := g.r
	if g.expect != "" {
		if g.matched || approve.Hash(a.Act, a.Target, a.Content) != g.expect {
			g.matched = false
			return tool.Verdict{Refused: approve.ErrMismatch.Error() + ": nothing was done"}
		}
		g.matched = true
		if v := r.explain(g.final); v.Effect == policy.Deny {
			r.emitVerdict(g.step, v)
			return tool.Verdict{Refused: refusal(v)}
		}
		return tool.Verdict{Action: g.final}
	}
	v := r.explain(a)
	r.emitVerdict(g.step, v)
	switch v.Effect {
	case policy.Allow:
		return tool.Verdict{Action: a}
	case policy.Deny:
		return tool.Verdict{Refused: refusal(v)}
	}
	d, _ := r.ask(ctx, g.step, g.call, a, v)
	switch d.Kind {
	case approve.Defer:
		req := r.lastRequest
		g.deferred = &store.Approval{ID: req.ID, RunID: r.runID, Step: g.step, CallID: g.call.ID, Tool: g.call.Name,
			Arguments: g.call.Arguments, Act: string(a.Act), Target: a.Target, Content: a.Content, Shown: req.Shown,
			Hash: req.Hash, Rule: v.Rule, Layer: v.Layer, CreatedAt: time.Now()}
		return tool.Verdict{Deferred: req.ID}
	case approve.Approve:
		final := rewrite(a, d.Rewrite)
		if fv := r.explain(final); fv.Effect == policy.Deny {
			r.emitVerdict(g.step, fv)
			return tool.Verdict{Refused: "the approved action crosses a deny: " + refusal(fv)}
		}
		r.remember(d.Remember)
		return tool.Verdict{Action: final}
	}
	return tool.Verdict{Refused: "denied by the approver: " + d.Reason}
}

// rewrite applies an approver's rewrite to an action.
func rewrite(a tool.Action, rw *approve.Rewrite) tool.Action {
	if rw == nil {
		return a
	}
	if rw.Target != "" {
		a.Target = rw.Target
	}
	if rw.Content != nil {
		a.Content = *rw.Content
	}
	return a
}

// decided is a decision on a deferred request, waiting to be carried out
// and told to the model at the start of the next step.
type decided struct {
	approval store.Approval
	decision approve.Decision
}

// applyDecisions carries out the decisions on deferred requests at the
// start of step n and returns the observations that tell the model. An
// approved action is performed exactly as approved, through its tool,
// unless it is in doubt after a crash.
func (r *runner) applyDecisions(ctx context.Context, n int) ([]store.Observation, []string, error) {
	var obs []store.Observation
	var applied []string
	for _, d := range r.decided {
		a := &d.approval
		head := fmt.Sprintf("A person decided on the call %s to %s (%s %s), which waited for them (request %s): ", a.CallID, a.Tool, a.Act, a.Target, a.ID)
		var text string
		isErr := true
		switch a.State {
		case store.ApprovalDenied:
			text = head + "denied. " + d.decision.Reason
		case store.ApprovalRefused:
			text = head + "approved, but the policy in force now refuses it, so nothing was done."
		case store.ApprovalApproved:
			if slices.ContainsFunc(r.inDoubt, func(in store.Intent) bool { return in.CallID == a.CallID }) {
				text = head + "approved; carrying it out was interrupted, so it may or may not have happened (see above)."
				break
			}
			out, err := r.perform(ctx, n, a, d.decision)
			if err != nil {
				return nil, nil, err
			}
			text, isErr = head+"approved and carried out. Result:\n"+out.Output, out.IsError
		}
		obs = append(obs, store.Observation{Kind: store.ObservationDecision, CallID: a.CallID, Tool: a.Tool,
			Arguments: a.Arguments, Output: text, IsError: isErr})
		applied = append(applied, a.ID)
	}
	return obs, applied, nil
}

// perform carries out an approved action through its tool, with a gate
// that lets through only the action with the approved hash.
func (r *runner) perform(ctx context.Context, n int, a *store.Approval, d approve.Decision) (tool.Result, error) {
	t, ok := r.tools[a.Tool]
	if !ok {
		return tool.Result{IsError: true, Output: fmt.Sprintf("the tool %s is not offered to this run; nothing was done", a.Tool)}, nil
	}
	final := rewrite(tool.Action{Act: policy.Act(a.Act), Target: a.Target, Content: a.Content}, d.Rewrite)
	g := &callGate{r: r, step: n, call: provider.ToolCall{ID: a.CallID, Name: a.Tool, Arguments: a.Arguments}, expect: a.Hash, final: final}
	if !tool.IsIdempotent(t) {
		if _, err := r.st.OpenIntent(context.WithoutCancel(ctx), &store.Intent{RunID: r.runID, Step: n, CallID: a.CallID,
			Tool: a.Tool, Arguments: a.Arguments, CreatedAt: time.Now()}); err != nil {
			return tool.Result{}, wrap(ErrState, "record intent", err)
		}
	}
	env := r.env
	env.Gate = g
	args := a.Arguments
	if !tool.IsBuiltin(a.Tool) {
		var stop *tool.Result
		if args, stop = registeredCall(ctx, g, g.call); stop != nil {
			return *stop, nil
		}
	}
	return t.Call(ctx, &env, args), nil
}

// probe computes, without performing it, the action a deferred call would
// ask for now, and reports whether it is the action the person saw.
func (r *runner) probe(ctx context.Context, a *store.Approval) bool {
	t, ok := r.tools[a.Tool]
	if !ok {
		return false
	}
	if !tool.IsBuiltin(a.Tool) {
		// A registered tool's action is its call: exec of its name.
		return approve.Hash(policy.Exec, a.Tool, string(a.Arguments)) == a.Hash
	}
	p := &probeGate{}
	env := r.env
	env.Gate = p
	t.Call(ctx, &env, a.Arguments)
	return p.asked && approve.Hash(p.action.Act, p.action.Target, p.action.Content) == a.Hash
}

// probeGate records the first action a tool asks for and refuses it.
type probeGate struct {
	asked  bool
	action tool.Action
}

func (p *probeGate) Authorize(_ context.Context, a tool.Action) tool.Verdict {
	if !p.asked {
		p.asked, p.action = true, a
	}
	return tool.Verdict{Refused: "probe: nothing is done"}
}

func (p *probeGate) Peek(policy.Act, string) policy.Effect { return policy.Allow }

// decodeRemembered reads the remembered rules a run stored.
func decodeRemembered(raw json.RawMessage) ([]policy.Rule, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var rules []policy.Rule
	if err := json.Unmarshal(raw, &rules); err != nil {
		return nil, err
	}
	for i := range rules {
		if err := rules[i].Validate(); err != nil {
			return nil, err
		}
	}
	return rules, nil
}
