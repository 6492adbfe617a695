package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
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
	base = r.withBundles(base)
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

// explain evaluates an action. A command is judged by every program it
// would start, with the run's system PATH telling which spellings are the
// system's programs. A path is judged in its literal form and, through
// its symlinks, in the form it really names; the stricter verdict wins, so
// a link cannot carry a write past a rule.
func (r *runner) explain(a tool.Action) policy.Verdict {
	return r.explainVia(a, func(p string) (string, error) { return tool.Canonical(r.root, p) })
}

// explainVia is explain with the function that resolves a path's links.
func (r *runner) explainVia(a tool.Action, canonical func(string) (string, error)) policy.Verdict {
	if a.Act == policy.Exec && a.Argv != nil {
		return r.policy.ExplainArgv(a.Argv, r.env.Programs.Resolve)
	}
	v := r.policy.Explain(a.Act, a.Target)
	if a.Act != policy.Read && a.Act != policy.Write {
		return v
	}
	canon, err := canonical(a.Target)
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

func (r *runner) emitVerdict(step int, v policy.Verdict) { r.emit(verdictEvent(step, v)) }

// verdictEvent is the trace's record of a verdict.
func verdictEvent(step int, v policy.Verdict) Event {
	return Event{Kind: EventPolicy, Step: step, Act: v.Act, Target: v.Target, Effect: v.Effect, Rule: v.Rule, Layer: v.Layer}
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

	// dirs caches the canonical form of the directories Peek saw during
	// this one call, in which the workspace does not change under the
	// walk that asks.
	mu   sync.Mutex
	dirs map[string]string

	// emit receives the call's events; nil means the runner's.
	emit func(Event)
}

// emitVerdict traces a verdict of this call.
func (g *callGate) emitVerdict(step int, v policy.Verdict) {
	if g.emit != nil {
		g.emit(verdictEvent(step, v))
		return
	}
	g.r.emitVerdict(step, v)
}

var _ tool.Gate = (*callGate)(nil)

// Peek implements tool.Gate: the verdict Authorize would start from,
// judged through the links of the path's directories, without asking or
// tracing.
func (g *callGate) Peek(act policy.Act, target string) policy.Verdict {
	return g.r.explainVia(tool.Action{Act: act, Target: target}, g.canonical)
}

// canonical resolves the links of the directories along p, each
// directory once per call (a walk asks about every file of each), and
// keeps the last element as given: Peek's contract leaves a link there to
// the caller.
func (g *callGate) canonical(p string) (string, error) {
	dir, leaf := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if leaf == "" || leaf == "." || leaf == ".." {
		return tool.Canonical(g.r.root, p)
	}
	if dir == "" {
		return p, nil
	}
	g.mu.Lock()
	cdir, ok := g.dirs[dir]
	g.mu.Unlock()
	if !ok {
		c, err := tool.Canonical(g.r.root, dir)
		if err != nil {
			return "", err
		}
		g.mu.Lock()
		if g.dirs == nil {
			g.dirs = map[string]string{}
		}
		g.dirs[dir] = c
		g.mu.Unlock()
		cdir = c
	}
	return path.Join(cdir, leaf), nil
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
			g.emitVerdict(g.step, v)
			return tool.Verdict{Refused: refusal(v)}
		}
		return tool.Verdict{Action: g.final}
	}
	v := r.explain(a)
	g.emitVerdict(g.step, v)
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
		final, err := rewrite(a, d.Rewrite)
		if err != nil {
			return tool.Verdict{Refused: "the approver's rewrite is refused: " + err.Error()}
		}
		if fv := r.explain(final); fv.Effect == policy.Deny {
			g.emitVerdict(g.step, fv)
			return tool.Verdict{Refused: "the approved action crosses a deny: " + refusal(fv)}
		}
		r.remember(d.Remember)
		return tool.Verdict{Action: final}
	}
	return tool.Verdict{Refused: "denied by the approver: " + d.Reason}
}

// rewrite applies an approver's rewrite to an action. An exec is judged
// and performed by what it runs, so its rewrite changes the content — a
// command's argv, a tool's arguments — and the target follows from it:
// a rewrite that names another target, or a command content that is not
// an argv, is refused.
func rewrite(a tool.Action, rw *approve.Rewrite) (tool.Action, error) {
	if rw == nil {
		return a, nil
	}
	if a.Act == policy.Exec {
		if rw.Target != "" && rw.Target != a.Target {
			return a, fmt.Errorf("an exec is rewritten through its content (the argv, or the tool's arguments), not its target")
		}
		if rw.Content == nil {
			return a, nil
		}
		if a.Argv == nil {
			a.Content = *rw.Content
			return a, nil
		}
		argv, err := tool.ParseArgv(*rw.Content)
		if err != nil {
			return a, err
		}
		return tool.CommandAction(argv), nil
	}
	if rw.Target != "" {
		a.Target = rw.Target
	}
	if rw.Content != nil {
		a.Content = *rw.Content
	}
	return a, nil
}

// storedAction is the action a deferred request persisted.
func storedAction(a *store.Approval) (tool.Action, error) {
	act, ok := tool.ActionOf(policy.Act(a.Act), a.Target, a.Content)
	if !ok {
		return act, fmt.Errorf("the stored command of request %s is not an argv", a.ID)
	}
	return act, nil
}

// decided is a decision on a deferred request, waiting to be carried out
// before the next step.
type decided struct {
	approval store.Approval
	decision approve.Decision
}

// carryOut carries out the decisions on deferred requests, before the
// next model step, records what each came to, and puts those results
// before the model's next turn. Carrying out what a person approved is not
// a model step: it happens whatever the budgets say. When an approved
// action was carried out and the gate then passes, the run ends success
// and carryOut returns its result.
func (r *runner) carryOut(ctx context.Context) (*Result, error) {
	if len(r.decided) == 0 {
		return nil, nil
	}
	n := len(r.history) + 1
	r.cur = n
	var performed []store.Performed
	done := false
	for _, d := range r.decided {
		a := &d.approval
		head := fmt.Sprintf("A person decided on the call %s to %s (%s %s), which waited for them (request %s): ", a.CallID, a.Tool, a.Act, a.Target, a.ID)
		var text string
		isErr := true
		switch a.State {
		case store.ApprovalDenied:
			text = head + "denied. " + d.decision.Reason
		case store.ApprovalRefused:
			text = head + "approved, but the policy in force now refuses it, so nothing was done. " + d.decision.Reason
		case store.ApprovalApproved:
			if slices.ContainsFunc(r.inDoubt, func(in store.Intent) bool { return in.CallID == a.CallID }) {
				text = head + "approved; carrying it out was interrupted, so it may or may not have happened (see above)."
				break
			}
			out, err := r.perform(ctx, n, a, d.decision)
			if err != nil {
				return nil, err
			}
			text, isErr = head+"approved and carried out. Result:\n"+out.Output, out.IsError
			done = done || !out.IsError
		}
		o := store.Observation{Kind: store.ObservationDecision, CallID: a.CallID, Tool: a.Tool, Arguments: a.Arguments, Output: text, IsError: isErr}
		performed = append(performed, store.Performed{ID: a.ID, CallID: a.CallID, Result: o})
		r.pre = append(r.pre, o)
		r.applied = append(r.applied, a.ID)
	}
	r.decided = nil
	if err := r.st.RecordDecisions(context.WithoutCancel(ctx), r.lease, performed, r.takePending()); err != nil {
		return nil, storeError("record the decisions carried out", err)
	}
	// A task with nothing to check, or with an output schema, ends on the
	// model's answer: the model is told and goes on.
	if !done || len(r.verifiers) == 0 || r.schema != nil {
		return nil, nil
	}
	passed, _, err := r.verify(ctx, n)
	if err != nil || !passed {
		return nil, err
	}
	return r.finish(ctx, Outcome{Kind: Success, Reason: "the approved action was carried out, and every verification check passed"}, nil)
}

// perform carries out an approved action through its tool, with a gate
// that lets through only the action with the approved hash.
func (r *runner) perform(ctx context.Context, n int, a *store.Approval, d approve.Decision) (tool.Result, error) {
	t, ok := r.tools[a.Tool]
	if !ok {
		return tool.Result{IsError: true, Output: fmt.Sprintf("the tool %s is not offered to this run; nothing was done", a.Tool)}, nil
	}
	stored, err := storedAction(a)
	if err == nil {
		stored, err = rewrite(stored, d.Rewrite)
	}
	if err != nil {
		return tool.Result{IsError: true, Output: "the approved action cannot be performed: " + err.Error() + "; nothing was done"}, nil
	}
	final := stored
	g := &callGate{r: r, step: n, call: provider.ToolCall{ID: a.CallID, Name: a.Tool, Arguments: a.Arguments}, expect: a.Hash, final: final}
	if !tool.IsIdempotent(t) {
		if _, err := r.st.OpenIntent(context.WithoutCancel(ctx), r.lease, &store.Intent{RunID: r.runID, Step: n, CallID: a.CallID,
			Tool: a.Tool, Arguments: a.Arguments, CreatedAt: time.Now()}); err != nil {
			return tool.Result{}, storeError("record intent", err)
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
	r.emit(Event{Kind: EventToolCall, Step: n, Tool: a.Tool, CallID: a.CallID, Arguments: a.Arguments})
	res := t.Call(ctx, &env, args)
	r.emit(Event{Kind: EventToolResult, Step: n, Tool: a.Tool, CallID: a.CallID, IsError: res.IsError, Output: clip(res.Output, outputPreview)})
	return res, nil
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

func (p *probeGate) Peek(act policy.Act, target string) policy.Verdict {
	return policy.Verdict{Act: act, Target: target, Effect: policy.Allow}
}

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
