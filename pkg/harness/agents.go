package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/tree"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// Containment caps a tree of agents: a run with one offers its agent the
// spawn_agent and collect_agents tools, and every agent it spawns, at any
// depth, is bound by the same caps. A zero field means its default.
type Containment struct {
	// MaxAgents caps the agents of the tree, the root included; a spawn
	// past it is refused. Required: at least 2.
	MaxAgents int `json:"max_agents"`
	// MaxConcurrent caps the agents that step at once; a spawn past it
	// waits in the tree's queue. An agent waiting for its children does
	// not count. Zero means 8 (or MaxAgents, if fewer).
	MaxConcurrent int `json:"max_concurrent,omitempty"`
	// MaxDepth caps how deep the tree grows: 1 lets the root spawn
	// children that spawn nothing. Zero means 1.
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxTokens is the tree's token ceiling: input plus output tokens of
	// every agent together.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD is the tree's money ceiling, in US dollars; every
	// provider must know its price.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// Time is the tree's wall-clock ceiling, counted from the root's
	// start like the root's own time budget.
	Time Duration `json:"time,omitempty"`
}

func (c *Containment) validate(field string) error {
	switch {
	case c.MaxAgents < 2:
		return configError(field+".max_agents", "a tree needs room for the root and one agent: at least 2, got %d", c.MaxAgents)
	case c.MaxConcurrent < 0:
		return configError(field+".max_concurrent", "must not be negative")
	case c.MaxDepth < 0:
		return configError(field+".max_depth", "must not be negative")
	case c.MaxTokens < 0:
		return configError(field+".max_tokens", "must not be negative")
	case c.MaxCostUSD < 0:
		return configError(field+".max_cost_usd", "must not be negative")
	case c.Time < 0:
		return configError(field+".time", "must not be negative")
	}
	return nil
}

func (c *Containment) concurrent() int {
	if c.MaxConcurrent > 0 {
		return c.MaxConcurrent
	}
	return min(8, c.MaxAgents)
}

func (c *Containment) depth() int { return max(c.MaxDepth, 1) }

// errParentEnded is the cause of the context of an agent whose parent
// ended without collecting it.
type errParentEnded struct{ parent, outcome string }

func (e *errParentEnded) Error() string {
	return fmt.Sprintf("its parent %s ended (%s) without collecting it", e.parent, e.outcome)
}

// agentTree is a tree of agents being driven under one lease, one ledger
// and one workspace. The root's runner drives on the caller's goroutine;
// every other agent on a goroutine the tree owns, started by a spawn (or
// a resume) and waited for by end.
type agentTree struct {
	st       store.Store
	lease    *store.Lease // the root's
	cont     Containment
	opts     Options // the root's, with the observer and approver serialised
	rootID   string
	started  time.Time // the root's start
	paused   time.Duration
	ledger   *tree.Ledger
	slots    *tree.Slots
	files    *tree.Workspace
	ctx      context.Context // the root's held context, every agent's parent
	rootMCP  *runner         // the runner whose MCP session the tree shares
	rootTask TaskContract

	emitMu sync.Mutex // one observer call at a time, across agents
	askMu  sync.Mutex // one approver call at a time, across agents

	mu       sync.Mutex
	haltedBy Budget            // the ceiling that halted the tree
	agents   map[string]*agent // by run id
	byPath   map[string]*agent
	wg       sync.WaitGroup
}

// agent is one agent of a tree, as the tree and its parent see it.
type agent struct {
	id, path string
	parent   *agent // nil for the root
	depth    int
	task     json.RawMessage // as stored; a re-spawn with the same task adopts it
	done     chan struct{}   // closed when the agent's drive ends
	res      *Result         // how it ended, set before done closes
	err      error
	changed  []string // the files it wrote, set before done closes
	cancel   context.CancelCauseFunc
	// collected is set once the parent has been told the result.
	collected bool
	kids      []*agent
	held      bool // holds a concurrency slot; touched by its own goroutine only
}

// newTree makes the tree of root, a runner about to drive under lease.
func newTree(ctx context.Context, root *runner, c Containment, lease *store.Lease, spent tree.Amount) *agentTree {
	t := &agentTree{
		st:       root.st,
		lease:    lease,
		cont:     c,
		opts:     root.opts,
		rootID:   root.runID,
		started:  root.startedAt,
		paused:   root.paused,
		ledger:   tree.NewLedger(tree.Amount{Tokens: c.MaxTokens, USD: c.MaxCostUSD}, spent),
		slots:    tree.NewSlots(c.concurrent()),
		files:    tree.NewWorkspace(),
		ctx:      ctx,
		rootMCP:  root,
		rootTask: root.task,
		agents:   map[string]*agent{},
		byPath:   map[string]*agent{},
	}
	if obs := root.opts.Observer; obs != nil {
		t.opts.Observer = func(e Event) {
			t.emitMu.Lock()
			defer t.emitMu.Unlock()
			obs(e)
		}
	}
	if ap := root.opts.Approver; ap != nil {
		t.opts.Approver = approve.Func(func(ctx context.Context, req *approve.Request) (approve.Decision, error) {
			t.askMu.Lock()
			defer t.askMu.Unlock()
			return ap.Decide(ctx, req)
		})
	}
	a := &agent{id: root.runID, path: root.path, done: make(chan struct{})}
	t.agents[a.id], t.byPath[a.path] = a, a
	root.opts.Observer, root.opts.Approver = t.opts.Observer, t.opts.Approver
	root.joinTree(t, a)
	return t
}

// deadline is the end of the tree's time ceiling; zero for none.
func (t *agentTree) deadline() time.Time {
	if t.cont.Time <= 0 {
		return time.Time{}
	}
	return t.started.Add(time.Duration(t.cont.Time) + t.paused)
}

// halt halts the tree on the ceiling of budget, with reason unless the
// ledger already has one, and returns the outcome of the agent that found
// the ceiling reached.
func (t *agentTree) halt(budget Budget, reason string) Outcome {
	if reason != "" {
		t.ledger.Halt(reason)
	}
	t.mu.Lock()
	if t.haltedBy == "" {
		t.haltedBy = budget
	}
	t.mu.Unlock()
	return t.haltOutcome()
}

// haltOutcome is how an agent of a halted tree ends.
func (t *agentTree) haltOutcome() Outcome {
	t.mu.Lock()
	by := t.haltedBy
	t.mu.Unlock()
	return Outcome{Kind: BudgetCeilingReached, Budget: by, Reason: "the tree halted: " + t.ledger.Halted()}
}

// ceilingBudget names the ceiling the ledger's draws ran into: tokens
// when the tree caps them and has spent most of them, else money.
func (t *agentTree) ceilingBudget() Budget {
	c, s := t.ledger.Ceiling(), t.ledger.Spent()
	switch {
	case c.USD == 0:
		return BudgetTokens
	case c.Tokens == 0:
		return BudgetMoney
	case float64(s.Tokens)/float64(c.Tokens) >= s.USD/c.USD:
		return BudgetTokens
	}
	return BudgetMoney
}

// agentPath is the path a request names its agent by: the run's path in a
// tree, and empty outside one.
func (r *runner) agentPath() string {
	if r.tree == nil {
		return ""
	}
	return r.path
}

// joinTree makes r an agent of t: it draws from the tree's ledger, writes
// under the tree's lease through its own view of the workspace, and is
// offered the tree's tools while it may still spawn.
func (r *runner) joinTree(t *agentTree, a *agent) {
	r.tree, r.self = t, a
	r.env.Files = t.files.Agent(a.path)
	if t.opts.wrapFiles != nil {
		r.env.Files = t.opts.wrapFiles(r.env.Files)
	}
	for _, s := range tree.Specs(a.depth < t.cont.depth()) {
		r.specs = append(r.specs, s)
	}
	r.system += treePrompt
}

// treePrompt tells an agent of a tree how to work with others.
const treePrompt = "\n\nYou can split the task across child agents with spawn_agent: each works in the same workspace under your boundary, " +
	"and its spend comes out of one ceiling shared by the whole tree. Give each child a self-contained goal and, where you can, a verification. " +
	"Other agents may change files while you work: read a file before you write it, and on a conflict read it again."

// hold takes a concurrency slot for a, unless it holds one.
func (t *agentTree) hold(ctx context.Context, a *agent) error {
	if a.held {
		return nil
	}
	if err := t.slots.Acquire(ctx); err != nil {
		return err
	}
	a.held = true
	return nil
}

// yield gives a's slot back, while it waits.
func (t *agentTree) yield(a *agent) {
	if a.held {
		a.held = false
		t.slots.Release()
	}
}

// spawnArgs are spawn_agent's arguments.
type spawnArgs struct {
	Goal         string         `json:"goal"`
	Verification []verify.Check `json:"verification,omitempty"`
	Budgets      *Budgets       `json:"budgets,omitempty"`
	Deny         tree.Deny      `json:"deny,omitzero"`
	Wait         *bool          `json:"wait,omitempty"`
}

// collectArgs are collect_agents's arguments.
type collectArgs struct {
	Agents []string `json:"agents,omitempty"`
}

// treeCall runs a call of one of the tree's tools. Only a store failure is
// an error.
func (r *runner) treeCall(ctx context.Context, n int, call provider.ToolCall, emit func(Event)) (tool.Result, error) {
	if call.Name == tree.CollectTool {
		return r.collect(ctx, n, call, emit)
	}
	child, wait, res, err := r.spawn(ctx, n, call, emit)
	if child == nil || !wait || err != nil {
		return res, err
	}
	return r.await(ctx, n, []*agent{child}, emit)
}

// spawnAll runs a turn's consecutive spawn_agent calls: every child is
// started first, then the ones the model waits for are waited for, so
// that children spawned in one turn work at once.
func (r *runner) spawnAll(ctx context.Context, n int, calls []provider.ToolCall) ([]store.Observation, error) {
	kids := make([]*agent, len(calls))
	waits := make([]bool, len(calls))
	results := make([]tool.Result, len(calls))
	for i, call := range calls {
		r.emit(Event{Kind: EventToolCall, Step: n, Tool: call.Name, CallID: call.ID, Arguments: call.Arguments})
		var err error
		if kids[i], waits[i], results[i], err = r.spawn(ctx, n, call, r.emit); err != nil {
			return nil, err
		}
	}
	obs := make([]store.Observation, len(calls))
	for i, call := range calls {
		if kids[i] != nil && waits[i] {
			var err error
			if results[i], err = r.await(ctx, n, kids[i:i+1], r.emit); err != nil {
				return nil, err
			}
		}
		res := results[i]
		if res.Refusal != "" {
			r.emit(Event{Kind: EventRefusal, Step: n, Tool: call.Name, CallID: call.ID, Reason: res.Refusal, IsError: true})
		}
		r.emit(Event{Kind: EventToolResult, Step: n, Tool: call.Name, CallID: call.ID, IsError: res.IsError, Output: clip(res.Output, outputPreview)})
		obs[i] = store.Observation{Kind: store.ObservationTool, CallID: call.ID, Tool: call.Name, Arguments: call.Arguments,
			Output: res.Output, IsError: res.IsError, Refusal: res.Refusal}
	}
	return obs, nil
}

// spawn starts a child agent, or adopts the one an earlier drive of this
// step started with the same task. It returns the child and whether the
// model waits for it, or the result that refuses the spawn.
func (r *runner) spawn(ctx context.Context, n int, call provider.ToolCall, emit func(Event)) (*agent, bool, tool.Result, error) {
	t := r.tree
	if r.self.depth >= t.cont.depth() {
		why := fmt.Sprintf("the tree's depth cap of %d is reached (containment.max_depth): you cannot spawn; do the work yourself", t.cont.depth())
		return nil, false, r.refuseSpawn(n, emit, why, "max_depth"), nil
	}
	var a spawnArgs
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, false, badTreeArgs(tree.SpawnTool, err), nil
	}
	if strings.TrimSpace(a.Goal) == "" {
		return nil, false, badTreeArgs(tree.SpawnTool, errors.New("goal: required")), nil
	}
	task, err := r.childTask(&a)
	if err != nil {
		return nil, false, badTreeArgs(tree.SpawnTool, err), nil
	}
	taskJSON, err := json.Marshal(task)
	if err != nil { // every field of a resolved task encodes
		return nil, false, badTreeArgs(tree.SpawnTool, err), nil
	}
	pol := tree.Narrow(r.policy, a.Deny)
	if pol != nil {
		if err := pol.Validate(); err != nil {
			return nil, false, badTreeArgs(tree.SpawnTool, fmt.Errorf("deny: %w", err)), nil
		}
	}
	var polJSON json.RawMessage
	if pol != nil {
		if polJSON, err = json.Marshal(pol); err != nil {
			return nil, false, badTreeArgs(tree.SpawnTool, err), nil
		}
	}

	t.mu.Lock()
	// The k-th spawn of step n has path <parent>/<n>.<k>: a resumed step
	// that spawns the same task again finds the child it started before.
	var child *agent
	var path string
	for k := 0; ; k++ {
		path = fmt.Sprintf("%s/%d.%d", r.path, n, k)
		ex := t.byPath[path]
		if ex == nil {
			break
		}
		if !r.adopted[ex.id] && bytes.Equal(ex.task, taskJSON) {
			child = ex
			break
		}
	}
	adopted := child != nil
	var cap, why string
	if !adopted {
		switch {
		case len(t.agents) >= t.cont.MaxAgents:
			cap, why = "max_agents", fmt.Sprintf("the tree's cap of %d agents is reached (containment.max_agents)", t.cont.MaxAgents)
		case t.ledger.Halted() != "":
			cap, why = "ceiling", "the tree's spend ceiling is reached: "+t.ledger.Halted()
		case !t.deadline().IsZero() && !time.Now().Before(t.deadline()):
			cap, why = "time", fmt.Sprintf("the tree's time ceiling of %s is used up (containment.time)", time.Duration(t.cont.Time))
		}
	}
	if cap != "" {
		t.mu.Unlock()
		return nil, false, r.refuseSpawn(n, emit, why, cap), nil
	}
	if !adopted {
		child = &agent{id: store.NewRunID(), path: path, parent: r.self, depth: r.self.depth + 1, task: taskJSON, done: make(chan struct{})}
		t.agents[child.id], t.byPath[path] = child, child
		r.self.kids = append(r.self.kids, child)
	}
	r.adopted[child.id] = true
	t.mu.Unlock()

	if adopted {
		emit(Event{Kind: EventAgentSpawned, Step: n, Agent: &AgentEvent{ID: child.id, Path: child.path, Goal: a.Goal, Adopted: true}})
	} else {
		queued := t.slots.Queued() > 0 || func() bool { now, _ := t.slots.Live(); return now >= t.cont.concurrent() }()
		rec := &store.Run{ID: child.id, ParentID: r.runID, RootID: t.rootID, AgentPath: path, Task: taskJSON, Policy: polJSON,
			Provider: r.providers[0].Name(), Status: store.StatusQueued, StartedAt: time.Now()}
		if err := t.st.CreateAgent(context.WithoutCancel(ctx), t.lease, rec, nil); err != nil {
			t.mu.Lock()
			delete(t.agents, child.id)
			delete(t.byPath, path)
			r.self.kids = r.self.kids[:len(r.self.kids)-1]
			t.mu.Unlock()
			return nil, false, tool.Result{}, storeError("record a spawned agent", err)
		}
		emit(Event{Kind: EventAgentSpawned, Step: n, Agent: &AgentEvent{ID: child.id, Path: path, Goal: a.Goal, Queued: queued}})
		t.start(child, func(ctx context.Context) (*Result, error) { return t.runFresh(ctx, child, task, pol, rec.StartedAt) })
	}
	if a.Wait != nil && !*a.Wait {
		return child, false, tool.Result{Output: fmt.Sprintf("agent %s (%s) is working on its goal in the background; collect it with collect_agents", child.path, child.id)}, nil
	}
	return child, true, tool.Result{}, nil
}

// childTask is the task of a child spawned with a: in the parent's
// workspace, with its budgets cut to what the tree has left.
func (r *runner) childTask(a *spawnArgs) (TaskContract, error) {
	t := r.tree
	task := TaskContract{Version: ContractVersion, Goal: a.Goal, Root: r.task.Root, Verification: a.Verification,
		Constraints: r.task.Constraints}
	if a.Budgets != nil {
		task.Budgets = *a.Budgets
	}
	if task.Budgets.MaxSteps == 0 {
		task.Budgets.MaxSteps = r.task.maxSteps()
	}
	left := t.ledger.Ceiling().Sub(t.ledger.Spent())
	if c := t.ledger.Ceiling(); c.Tokens > 0 && (task.Budgets.MaxTokens == 0 || task.Budgets.MaxTokens > left.Tokens) {
		task.Budgets.MaxTokens = max(left.Tokens, 1)
	}
	if c := t.ledger.Ceiling(); c.USD > 0 && (task.Budgets.MaxCostUSD == 0 || task.Budgets.MaxCostUSD > left.USD) {
		task.Budgets.MaxCostUSD = max(left.USD, 1e-9)
	}
	if d := t.deadline(); !d.IsZero() {
		rest := Duration(time.Until(d).Round(time.Millisecond))
		if task.Budgets.Time == 0 || task.Budgets.Time > rest {
			task.Budgets.Time = max(rest, Duration(time.Millisecond))
		}
	}
	return task.resolved()
}

// refuseSpawn is a spawn refused for a cap: the parent is told, by name,
// and can adapt.
func (r *runner) refuseSpawn(n int, emit func(Event), why, cap string) tool.Result {
	emit(Event{Kind: EventAgentRefused, Step: n, Reason: why, Agent: &AgentEvent{Cap: cap}})
	return tool.Result{IsError: true, Refusal: why, Output: "[refused] spawn_agent: " + why}
}

func badTreeArgs(name string, err error) tool.Result {
	return tool.Result{IsError: true, Output: fmt.Sprintf("[error] %s: bad arguments: %v", name, err)}
}

// collect waits for children started in the background.
func (r *runner) collect(ctx context.Context, n int, call provider.ToolCall, emit func(Event)) (tool.Result, error) {
	var a collectArgs
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return badTreeArgs(tree.CollectTool, err), nil
	}
	t := r.tree
	t.mu.Lock()
	var kids []*agent
	var unknown []string
	if len(a.Agents) == 0 {
		for _, k := range r.self.kids {
			if !k.collected {
				kids = append(kids, k)
			}
		}
	}
	for _, p := range a.Agents {
		k := t.byPath[p]
		if k == nil || k.parent != r.self {
			unknown = append(unknown, p)
			continue
		}
		kids = append(kids, k)
	}
	t.mu.Unlock()
	if len(unknown) > 0 {
		return tool.Result{IsError: true, Output: fmt.Sprintf("[error] collect_agents: %s: no child of yours has that path", strings.Join(unknown, ", "))}, nil
	}
	if len(kids) == 0 {
		return tool.Result{Output: "no child agent is left to collect"}, nil
	}
	return r.await(ctx, n, kids, emit)
}

// await waits for kids, without a concurrency slot, and reports how each
// ended. A child that waits for a person pauses the waiting agent too:
// its step ends awaiting that request.
func (r *runner) await(ctx context.Context, n int, kids []*agent, emit func(Event)) (tool.Result, error) {
	t := r.tree
	t.yield(r.self)
	for _, k := range kids {
		select {
		case <-k.done:
		case <-ctx.Done():
		}
	}
	if err := t.hold(ctx, r.self); err != nil {
		// The wait was cut short: the run ends at its next check.
		return tool.Result{IsError: true, Output: "[error] the wait for child agents was cut short: " + err.Error()}, nil
	}
	var b strings.Builder
	isErr := false
	for i, k := range kids {
		if i > 0 {
			b.WriteString("\n\n")
		}
		select {
		case <-k.done:
		default:
			fmt.Fprintf(&b, "agent %s (%s) has not ended", k.path, k.id)
			isErr = true
			continue
		}
		t.mu.Lock()
		k.collected = true
		t.mu.Unlock()
		if k.err != nil {
			fmt.Fprintf(&b, "agent %s (%s) failed: %v", k.path, k.id, k.err)
			isErr = true
			continue
		}
		out := k.res.Outcome
		o := out
		emit(Event{Kind: EventAgentFinished, Step: n, Agent: &AgentEvent{ID: k.id, Path: k.path, Outcome: &o}})
		fmt.Fprintf(&b, "agent %s (%s) ended %s after %d steps (%d tokens", k.path, k.id, out.Kind, out.Steps, out.Usage.Total())
		if out.Cost.Known && out.Cost.USD > 0 {
			fmt.Fprintf(&b, ", $%.6f", out.Cost.USD)
		}
		b.WriteString(")")
		if out.Reason != "" {
			fmt.Fprintf(&b, ": %s", out.Reason)
		}
		if out.Answer != "" {
			fmt.Fprintf(&b, "\nanswer: %s", clip(out.Answer, 4000))
		}
		if len(k.changed) > 0 {
			fmt.Fprintf(&b, "\nfiles changed: %s", strings.Join(k.changed, ", "))
		}
		switch out.Kind {
		case Success, Finished:
		case AwaitingApproval:
			b.WriteString("\nIt waits for a person's decision; the tree pauses until it is decided. Collect it again afterwards.")
			if r.blocked == nil {
				r.blocked = &Outcome{Kind: AwaitingApproval, RequestID: out.RequestID,
					Reason: fmt.Sprintf("agent %s waits for a person's decision (request %s): %s", k.path, out.RequestID, out.Reason)}
			}
			isErr = true
		default:
			isErr = true
		}
	}
	return tool.Result{Output: b.String(), IsError: isErr}, nil
}

// start drives child on a goroutine the tree owns: it waits for a
// concurrency slot, runs drive, and records how it ended.
func (t *agentTree) start(child *agent, drive func(context.Context) (*Result, error)) {
	ctx, cancel := context.WithCancelCause(t.ctx)
	child.cancel = cancel
	t.wg.Go(func() {
		defer close(child.done)
		defer cancel(nil)
		defer t.yield(child)
		if err := t.hold(ctx, child); err != nil {
			child.res, child.err = t.endUnstarted(child, Outcome{Kind: Cancelled, Reason: "cancelled before it started: " + err.Error()})
			return
		}
		if why := t.ledger.Halted(); why != "" {
			child.res, child.err = t.endUnstarted(child, Outcome{Kind: BudgetCeilingReached, Reason: "the tree halted before this agent started: " + why})
			return
		}
		child.res, child.err = drive(ctx)
	})
}

// endUnstarted records the outcome of an agent that never ran a step.
func (t *agentTree) endUnstarted(a *agent, out Outcome) (*Result, error) {
	data, err := json.Marshal(out)
	if err != nil {
		return nil, wrap(ErrState, "encode outcome", err)
	}
	f := &store.Finish{RunID: a.id, Status: store.StatusFinished, Outcome: string(out.Kind), OutcomeJSON: data, At: time.Now()}
	if err := t.st.FinishRun(context.WithoutCancel(t.ctx), t.lease.For(a.id), f); err != nil {
		return nil, storeError("finish agent "+a.path, err)
	}
	return &Result{RunID: a.id, Outcome: out}, nil
}

// childRunner makes the runner of agent a, of task under pol.
func (t *agentTree) childRunner(a *agent, task TaskContract, pol *policy.Policy) (*runner, error) {
	opts := t.opts
	opts.Policy = pol
	opts.MCPServers = nil // the tree shares the root's session
	r, err := newRunner(task, opts, t.st)
	if err != nil {
		return nil, err
	}
	r.runID, r.path = a.id, a.path
	r.serveLive()
	r.lease = t.lease.For(a.id)
	r.joinTree(t, a)
	r.setPolicy(pol, nil)
	if root := t.rootMCP; root.mcp != nil {
		r.mcp, r.sharedMCP = root.mcp, true
		r.addMCPTools()
	}
	return r, nil
}

// runFresh drives a spawned agent from its first step.
func (t *agentTree) runFresh(ctx context.Context, a *agent, task TaskContract, pol *policy.Policy, started time.Time) (*Result, error) {
	r, err := t.childRunner(a, task, pol)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.startedAt = started
	if err := r.authorizeProviders(ctx); err != nil {
		return nil, err
	}
	taskJSON, polJSON, err := r.encodeTask()
	if err != nil {
		return nil, err
	}
	r.emit(Event{Kind: EventRunStarted, Provider: r.providers[0].Name(), Text: r.task.Goal})
	if err := t.st.ReopenRun(context.WithoutCancel(ctx), r.lease, taskJSON, polJSON, time.Now(), r.takePending()); err != nil {
		return nil, storeError("start agent "+a.path, err)
	}
	res, err := r.loop(ctx, 1)
	t.settle(a, r, res)
	return res, err
}

// settle records what a finished agent changed and ends the children it
// left running when its outcome is final.
func (t *agentTree) settle(a *agent, r *runner, res *Result) {
	a.changed = changedFiles(r.history)
	if res == nil || res.Outcome.Kind == AwaitingApproval {
		return
	}
	t.mu.Lock()
	kids := slices.Clone(a.kids)
	t.mu.Unlock()
	for _, k := range kids {
		select {
		case <-k.done:
		default:
			if k.cancel != nil {
				k.cancel(&errParentEnded{parent: a.path, outcome: string(res.Outcome.Kind)})
			}
		}
	}
}

// end waits for every agent of the tree to end or pause.
func (t *agentTree) end() { t.wg.Wait() }

// changedFiles lists the files a run's committed steps wrote, each once,
// in the order first written.
func changedFiles(steps []store.Step) []string {
	var out []string
	seen := map[string]bool{}
	for i := range steps {
		for _, o := range steps[i].Observations {
			for _, p := range o.Changed {
				if !seen[p] {
					seen[p] = true
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// encodeTask returns the runner's task and base policy as stored.
func (r *runner) encodeTask() (task, pol json.RawMessage, err error) {
	if task, err = json.Marshal(r.task); err != nil {
		return nil, nil, wrap(ErrConfig, "encode task", err)
	}
	if r.base != nil {
		if pol, err = json.Marshal(r.base); err != nil {
			return nil, nil, wrap(ErrConfig, "encode policy", err)
		}
	}
	return task, pol, nil
}

// AgentEvent describes an agent of a tree, in the events of its parent.
type AgentEvent struct {
	// ID and Path name the agent.
	ID   string `json:"id,omitempty"`
	Path string `json:"path,omitempty"`
	// Goal is a spawned agent's goal.
	Goal string `json:"goal,omitempty"`
	// Queued says the spawned agent waits for a concurrency slot.
	Queued bool `json:"queued,omitempty"`
	// Adopted says a resumed step spawned an agent an earlier drive of
	// it had started: the agent goes on, it is not started again.
	Adopted bool `json:"adopted,omitempty"`
	// Cap names the cap a refused spawn hit: max_agents, max_depth,
	// ceiling or time.
	Cap string `json:"cap,omitempty"`
	// Outcome is how a collected agent ended.
	Outcome *Outcome `json:"outcome,omitempty"`
}

// LedgerEvent is one draw on a tree's ledger.
type LedgerEvent struct {
	// Drawn is what the call cost.
	Drawn tree.Amount `json:"drawn"`
	// Spent is the tree's spend after the draw, and Ceiling its ceiling
	// (zero fields: uncapped).
	Spent   tree.Amount `json:"spent"`
	Ceiling tree.Amount `json:"ceiling"`
}

// merge returns c with every field set in over replacing c's.
func (c Containment) merge(over Containment) Containment {
	if over.MaxAgents != 0 {
		c.MaxAgents = over.MaxAgents
	}
	if over.MaxConcurrent != 0 {
		c.MaxConcurrent = over.MaxConcurrent
	}
	if over.MaxDepth != 0 {
		c.MaxDepth = over.MaxDepth
	}
	if over.MaxTokens != 0 {
		c.MaxTokens = over.MaxTokens
	}
	if over.MaxCostUSD != 0 {
		c.MaxCostUSD = over.MaxCostUSD
	}
	if over.Time != 0 {
		c.Time = over.Time
	}
	return c
}

// restoreTree rebuilds the tree of root, a revived root runner, from the
// store: every agent's open spend is recovered first, so that the ledger
// starts from the tree's durable totals; the write history is replayed
// from the committed steps; and every agent that can go on gets a start
// function, which the caller calls once the tree's MCP session is up. An
// agent that waits on a pending request (its own or a descendant's) that
// ans does not answer stays as it is, and so does one that ended; askedBy
// is the agent whose request ans answers.
func restoreTree(ctx context.Context, root *runner, c Containment, lease *store.Lease, agents []store.Run,
	pending map[string]bool, askedBy string, ans *answer) (*agentTree, []func(), error) {
	st := root.st
	inDoubt := map[string][]store.Intent{}
	for _, a := range agents {
		if a.Status == store.StatusFinished {
			continue
		}
		in, err := st.Recover(ctx, lease.For(a.ID))
		if err != nil {
			return nil, nil, storeError("agent "+a.AgentPath+": recover", err)
		}
		inDoubt[a.ID] = in
	}
	all, err := st.Runs(ctx, store.RunFilter{RootID: root.runID, Limit: -1})
	if err != nil {
		return nil, nil, readError(root.runID, "read the tree's agents", err)
	}
	var spent tree.Amount
	for _, a := range all {
		spent = spent.Add(tree.Amount{Tokens: a.Usage.Total() + a.LostUsage.Total(), USD: a.Cost.USD + a.LostCost.USD})
	}
	t := newTree(ctx, root, c, lease, spent)

	// The files each agent wrote, in the order the steps committed.
	type write struct {
		at   time.Time
		path string
		by   string
	}
	var writes []write
	changed := map[string][]string{}
	for _, a := range all {
		steps := root.history
		if a.ID != root.runID {
			if steps, err = st.Steps(ctx, a.ID); err != nil {
				return nil, nil, readError(a.ID, "read steps", err)
			}
		}
		for i := range steps {
			for _, o := range steps[i].Observations {
				for _, p := range o.Changed {
					writes = append(writes, write{steps[i].FinishedAt, p, a.AgentPath})
				}
			}
		}
		changed[a.ID] = changedFiles(steps)
	}
	slices.SortStableFunc(writes, func(x, y write) int { return x.at.Compare(y.at) })
	for _, w := range writes {
		t.files.Wrote(w.path, w.by)
	}

	var starts []func()
	for _, rec := range agents {
		t.mu.Lock()
		parent := t.agents[rec.ParentID]
		t.mu.Unlock()
		if parent == nil {
			return nil, nil, &Error{Kind: ErrResume, Message: fmt.Sprintf("run %s: agent %s has parent %s, which is not in the tree", root.runID, rec.ID, rec.ParentID), Err: store.ErrCorrupt}
		}
		a := &agent{id: rec.ID, path: rec.AgentPath, parent: parent, depth: strings.Count(rec.AgentPath, "/"),
			task: rec.Task, done: make(chan struct{}), changed: changed[rec.ID]}
		t.mu.Lock()
		t.agents[a.id], t.byPath[a.path] = a, a
		parent.kids = append(parent.kids, a)
		t.mu.Unlock()
		parentEnded := parent.res != nil && parent.res.Outcome.Kind != AwaitingApproval
		var out Outcome
		if rec.Status == store.StatusFinished || rec.Status == store.StatusPaused {
			if err := json.Unmarshal(rec.OutcomeJSON, &out); err != nil || out.Kind == "" {
				return nil, nil, &Error{Kind: ErrResume, Message: "agent " + rec.ID + ": stored outcome is corrupt", Err: err}
			}
		}
		waits := rec.Status == store.StatusPaused && pending[out.RequestID] && (ans == nil || out.RequestID != ans.requestID)
		switch {
		case rec.Status == store.StatusFinished, waits:
			a.res = &Result{RunID: a.id, Outcome: out}
			close(a.done)
		case parentEnded:
			// Its parent ended and the crash came before it was told to.
			res, err := t.endUnstarted(a, Outcome{Kind: Cancelled, Reason: (&errParentEnded{parent.path, string(parent.res.Outcome.Kind)}).Error()})
			if err != nil {
				return nil, nil, err
			}
			a.res = res
			close(a.done)
		case rec.Status == store.StatusQueued:
			task, err := storedTask(&rec)
			if err != nil {
				return nil, nil, &Error{Kind: ErrResume, Message: "agent " + rec.ID + ": " + err.Error(), Err: err}
			}
			pol, err := storedPolicy(&rec)
			if err != nil {
				return nil, nil, err
			}
			started := rec.StartedAt
			starts = append(starts, func() {
				t.start(a, func(ctx context.Context) (*Result, error) { return t.runFresh(ctx, a, task, pol, started) })
			})
		default:
			rec := rec
			var d *approve.Decision
			if askedBy == rec.ID {
				d = &ans.decision
			}
			in := inDoubt[rec.ID]
			starts = append(starts, func() {
				t.start(a, func(ctx context.Context) (*Result, error) { return t.runRevived(ctx, a, &rec, in, ans, d) })
			})
		}
	}
	return t, starts, nil
}

// storedPolicy decodes a run's stored policy; nil for none.
func storedPolicy(rec *store.Run) (*policy.Policy, error) {
	if len(rec.Policy) == 0 {
		return nil, nil
	}
	p, err := policy.Parse(rec.Policy)
	if err != nil {
		return nil, &Error{Kind: ErrResume, Message: "run " + rec.ID + ": stored policy is corrupt", Err: err}
	}
	return &p, nil
}

// runRevived drives a resumed agent on from its last committed step,
// deciding first the request d answers, when it is the agent's.
func (t *agentTree) runRevived(ctx context.Context, a *agent, rec *store.Run, inDoubt []store.Intent, ans *answer, d *approve.Decision) (*Result, error) {
	task, err := storedTask(rec)
	if err != nil {
		return nil, &Error{Kind: ErrResume, Message: "agent " + rec.ID + ": " + err.Error(), Err: err}
	}
	pol, err := storedPolicy(rec)
	if err != nil {
		return nil, err
	}
	approvals, err := t.st.Approvals(ctx, a.id)
	if err != nil {
		return nil, readError(a.id, "read approvals", err)
	}
	opts := t.opts
	opts.Policy, opts.MCPServers = pol, nil
	r, err := revive(ctx, t.st, t.lease.For(a.id), rec, task, opts, pol, approvals, inDoubt)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.joinTree(t, a)
	if root := t.rootMCP; root.mcp != nil {
		r.mcp, r.sharedMCP = root.mcp, true
		r.addMCPTools()
	}
	if d != nil {
		i := slices.IndexFunc(approvals, func(x store.Approval) bool { return x.ID == ans.requestID })
		if i < 0 {
			return nil, &Error{Kind: ErrResume, Message: "agent " + a.id + ": no approval request " + ans.requestID, Err: approve.ErrUnknownRequest}
		}
		if err := r.decide(ctx, &approvals[i], *d); err != nil {
			return nil, err
		}
	}
	if err := r.authorizeProviders(ctx); err != nil {
		return nil, err
	}
	res, err := r.reopen(ctx, rec)
	t.settle(a, r, res)
	return res, err
}
