package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/git"
	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/memory"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/tree"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/harness/watch"
	"github.com/initorigin/io-harness-go/pkg/harness/window"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Options is the Go-side wiring of a run: the things that are not data.
// [Run] and [Resume] take the same Options; what only a resume takes is in
// [ResumeOptions].
type Options struct {
	// Provider answers the model turns. Required.
	Provider provider.Provider
	// Fallbacks are tried in order when the provider escalates (its
	// retries are used up, or it fails in a way retrying cannot fix).
	// Once a fallback has answered, the run stays on it.
	Fallbacks []provider.Provider
	// Store records the trace. Nil means a fresh in-memory store
	// (store/memory) that is closed when the call returns; Resume requires
	// one.
	Store store.Store
	// Observer, when set, receives every event as it happens, on the
	// run's goroutine. It must not block for long: the run waits for it.
	Observer func(Event)
	// Backoff shapes the wait between retries.
	Backoff Backoff
	// Policy is the permission boundary every action goes through. Nil
	// means none: everything inside the workspace is allowed (the root
	// confinement and the sandbox still hold). The provider layer is
	// added to it; see [policy.Merge].
	Policy *policy.Policy
	// Approver decides what the policy asks about. Nil denies every ask.
	Approver approve.Approver
	// Sandbox selects the sandbox backend that runs execution gates and
	// the exec tool; nil means the strongest that works here. A run makes
	// its sandbox the first time it needs one, and traces its events.
	Sandbox *sandbox.Options
	// NativeSandbox, when set, is a sandbox the caller made (sandbox.New)
	// and keeps, used for the run's native commands instead of one probed
	// for the run, so that many runs share one backend probe; Sandbox
	// then configures only the wasi backend. The run does not close it.
	// Its own Observer keeps getting its events, and the run's trace
	// gets them too (sandbox.WithObserver).
	NativeSandbox sandbox.Sandbox
	// Tools are tools the caller registers beside the built-in ones, such
	// as *tool.Wasm modules. A workspace task offers them; every call is
	// first checked against the exec policy on the tool's name. A name
	// may not be a built-in tool's or appear twice. A resume takes them
	// again.
	Tools []tool.Tool
	// OmitTools names built-in tools the run does not offer, such as
	// "exec" for an agent that must only read and edit.
	OmitTools []string
	// MCPServers are MCP servers whose tools the run offers as
	// mcp__<server>__<tool>. They are connected when the run starts:
	// starting a stdio server is an exec of its argv and reaching an HTTP
	// server a net action, both judged by the policy; a stdio server runs
	// in the run's sandbox unless it says host. A server that cannot be
	// reached fails the run before anything happens.
	MCPServers []mcp.Server
	// Git, when set, offers the git tools (package git) with this commit
	// identity, in a workspace task whose root is a repository.
	Git *git.Config
	// ViewImage offers view_image (package media), which shows the model
	// an image of the workspace in its next turn.
	ViewImage bool
	// TraceImages keeps the bytes of every image shown to the model in
	// the trace (EventImage); without it the trace keeps their hashes and
	// sizes only.
	TraceImages bool
	// Skills are directories of skills (package skill): each a skill's
	// directory or a directory of them. They are listed for the model and
	// read with read_skill. A skill that does not load fails the run.
	Skills []string
	// Bundles are bundle directories (package skill): each adds skills,
	// MCP servers and deny rules. A bundle that does not load is dropped
	// whole and reported (EventBundle), and the run goes on without it.
	Bundles []string
	// LookupEnv reads the caller's environment for the ${NAME} references
	// of MCP servers' env and headers; nil reads nothing.
	LookupEnv func(string) (string, bool)
	// Verifiers are checks the caller adds to the task's verification,
	// judged after every step like the task's own; Go code only, so a
	// resume takes them again.
	Verifiers []verify.Verifier
	// ContextShare is the part of the model's context window a request's
	// input may take before the history is folded into a summary; zero
	// means 0.6. A model whose window is unknown is sent the history
	// whole until its provider says the context is too long.
	ContextShare float64
	// DigestFolds folds the history with a digest made without a model,
	// never spending a model call on a summary.
	DigestFolds bool
	// ContextManager, when set, makes the run's context manager from the
	// task's text; nil means window.New with its defaults.
	ContextManager func(task string) window.Manager
	// Containment, when set, makes the run the root of a tree of agents:
	// it is offered spawn_agent and collect_agents, and the tree is
	// bound by these caps, stored with the run. A resume takes the stored
	// caps; ResumeOptions.Containment raises them.
	Containment *Containment
	// LeaseTTL is how long the run's lease holds without a renewal; the
	// driver renews it every third of that. A driver that dies on this
	// host is taken over at once; one on another host after LeaseTTL.
	// Zero means 30 seconds.
	LeaseTTL time.Duration
	// Live, when set, serves the run's events as they happen to watchers
	// in other processes on this host (watch.Follow, io-harness watch):
	// the run announces the hub's URL in its lease. Nil serves none;
	// watchers then see each step when it commits.
	Live *watch.Hub
	// Sinks receive every event in its JSON form as it happens, after the
	// Observer; see [Sink].
	Sinks []Sink

	// wrapFiles, when set, wraps each tree agent's view of the shared
	// workspace: only the negative controls of the tests set it
	// (export_test.go), to switch the write guard off.
	wrapFiles func(tool.Files) tool.Files
	// moreReach are tools reachTools builds after the reach packages':
	// only a negative control sets it (export_test.go), to stand for a
	// reach tool that tool.Reserved does not hold yet.
	moreReach []tool.Tool
	// retryUnchanged asks again after a context overflow even when
	// folding left the request as it was: only a negative control sets it
	// (export_test.go).
	retryUnchanged bool
	// estimateOnly judges every request by provider.EstimateInput alone:
	// only a negative control sets it (export_test.go).
	estimateOnly bool
	// blindAcquire takes a resumed run's lease whatever the run became
	// since it was read: only a negative control sets it (export_test.go).
	blindAcquire bool
}

// ResumeOptions are what only a resume takes.
type ResumeOptions struct {
	// Budgets raises the stored budgets field by field: every field set
	// here replaces the stored one, and the others stay. This is how a
	// run that ran out of steps, time, tokens or money continues.
	Budgets *Budgets
	// Reopen drives a run whose outcome is escalated or cancelled again.
	// A successful run is never driven again.
	Reopen bool
	// Containment raises a tree's stored caps field by field, as Budgets
	// does a run's: how a tree that reached its ceiling continues.
	Containment *Containment
	// Force takes the run from a driver that still holds its lease: one
	// that is alive, or whose death this process cannot see (another
	// host, before the lease expires). The former driver is fenced out:
	// nothing it writes afterwards reaches the store.
	Force bool
}

// Backoff is the retry schedule: Base doubled per retry, capped at Max,
// less up to a quarter of jitter. A provider's Retry-After replaces it up
// to Max; a provider that asks for a longer wait ends the run escalated,
// retryable, naming the wait.
type Backoff struct {
	// Base is the first wait; zero means 500ms.
	Base Duration `json:"base,omitempty"`
	// Max caps every wait; zero means 30s.
	Max Duration `json:"max,omitempty"`
}

// defaultLeaseTTL is the lease of a run whose Options set none.
const defaultLeaseTTL = 30 * time.Second

// owner is this process as a run's driver, with the hub it serves live
// events from.
func (o *Options) owner() store.Owner {
	self := store.Self()
	if o.Live != nil {
		self.Live = o.Live.URL()
	}
	return self
}

func (o *Options) leaseTTL() time.Duration {
	if o.LeaseTTL > 0 {
		return o.LeaseTTL
	}
	return defaultLeaseTTL
}

// Run validates task, records a new run in the store and drives it to an
// outcome. Every outcome, success or not, is a Result; an error means the
// run could not be driven at all. The run is in the store before anything
// (an observer included) learns its id.
//
// # Errors
//
// A bad task or option is an *Error of kind ErrConfig naming its field; a
// workspace that cannot be opened is ErrIO; a provider the policy refuses
// is ErrRefused (and no run is recorded); a store that cannot be written
// is ErrUnavailable or ErrState.
func Run(ctx context.Context, task TaskContract, opts Options) (*Result, error) {
	task, err := task.resolved()
	if err != nil {
		return nil, err
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := checkPrices(task.Budgets, opts); err != nil {
		return nil, err
	}
	st, closeStore, err := opts.store(ctx)
	if err != nil {
		return nil, err
	}
	defer closeStore()

	r, err := newRunner(task, opts, st)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.runID = store.NewRunID()
	r.startedAt = time.Now()
	r.serveLive()
	r.setPolicy(opts.Policy, nil)
	taskJSON, err := json.Marshal(r.task)
	if err != nil {
		return nil, wrap(ErrConfig, "encode task", err)
	}
	var policyJSON, contJSON json.RawMessage
	if opts.Policy != nil {
		if policyJSON, err = json.Marshal(opts.Policy); err != nil {
			return nil, wrap(ErrConfig, "encode policy", err)
		}
	}
	if opts.Containment != nil {
		if task.SingleFile() {
			return nil, configError("options.containment", "a tree of agents needs a workspace task (root), not a single file")
		}
		if contJSON, err = json.Marshal(opts.Containment); err != nil {
			return nil, wrap(ErrConfig, "encode containment", err)
		}
	}
	// Nobody hears of the run until it is stored: its first events wait.
	r.holding = true
	if err := r.authorizeProviders(ctx); err != nil {
		return nil, err
	}
	r.reportBundles()
	if err := r.connectMCP(ctx); err != nil {
		return nil, err
	}
	r.emit(Event{Kind: EventRunStarted, Provider: r.providers[0].Name(), Text: r.task.Goal})
	// A run whose start the caller has asked for is stored even if the
	// caller cancels now; the loop then ends it cancelled.
	lease, err := st.CreateRun(context.WithoutCancel(ctx), &store.Run{ID: r.runID, AgentPath: r.path, Task: taskJSON, Policy: policyJSON,
		Provider: r.providers[0].Name(), StartedAt: r.startedAt, Containment: contJSON}, r.takePending(), opts.owner(), opts.leaseTTL())
	if err != nil {
		return nil, storeError("create run", err)
	}
	ctx = r.hold(ctx, lease)
	if opts.Containment != nil {
		t := newTree(ctx, r, *opts.Containment, lease, tree.Amount{})
		if err := t.hold(ctx, r.self); err != nil {
			return nil, err
		}
	}
	r.deliverHeld()
	return r.drive(ctx, 1)
}

// drive runs the loop from step next and, for the root of a tree, waits
// for every agent of the tree to end or pause.
func (r *runner) drive(ctx context.Context, next int) (*Result, error) {
	res, err := r.loop(ctx, next)
	return r.endTree(res, err)
}

// endTree ends the tree of a root whose own drive ended with res.
func (r *runner) endTree(res *Result, err error) (*Result, error) {
	if t := r.tree; t != nil && r.self.parent == nil {
		t.settle(r.self, r, res)
		t.yield(r.self)
		t.end()
	}
	return res, err
}

// Resume continues a run from its last committed step, under its original
// id. Committed steps are not run again; tokens and money are restored from
// the store, what crashed calls spent included; the time budget counts
// wall-clock time since the run first started, downtime included, time
// spent paused for a person's decision excluded. An effect that was not
// idempotent and whose step never committed is reported to the model as in
// doubt, not repeated blindly.
//
// One driver drives a run at a time: Resume first takes the run's lease,
// before it calls a provider or a tool. A run whose driver lives is
// refused with ErrConflict naming it, unless ro.Force takes it over; a run
// whose driver died is taken over.
//
// The run keeps its permission boundary: opts.Policy when set (it then
// replaces the stored one), else the policy the run was started with.
//
// Resuming a run whose outcome is final (see [OutcomeKind.Final]) returns
// that outcome without calling the provider, unless ro.Reopen asks to
// drive an escalated or cancelled run again. A run that ran out of a
// budget continues when ro.Budgets raises it, and otherwise reports the
// same outcome again at no cost. A run awaiting approval stays so: answer
// it with [ResumeWithDecision]. A run whose last committed step passed its
// gate, which died before it could record its success, ends success
// without a request.
//
// # Errors
//
// An unknown run, a corrupt checkpoint or one written by newer code is an
// *Error of kind ErrResume; it never panics. A run another driver holds is
// ErrConflict. A provider the policy now refuses is ErrRefused.
func Resume(ctx context.Context, runID string, opts Options, ro ResumeOptions) (*Result, error) {
	return resume(ctx, runID, opts, ro, nil)
}

// ResumeWithDecision answers the approval request a run awaits, in any
// process that opens the run's store, and continues the run in this
// process: the answer of a caller that drives the run itself, which
// checks the action before it records the decision. To answer a run that
// another process drives, or a fleet's worker, use [Decide].
//
// An approval is checked against the policy again (the one in opts, or the
// run's), so a deny added while the decision waited still holds; then
// exactly the persisted action is performed — the action the person saw,
// with its hash — or its rewrite. It is performed at once, before any
// budget is checked: carrying out what a person approved is not a new
// model step. A run whose gate then passes ends success; otherwise the
// model is told at its next step. A denial becomes an observation. A
// deferral leaves the run waiting.
//
// # Errors
//
// Anything that does not match fails closed with an *Error of kind
// ErrResume and does nothing: an unknown request id
// ([approve.ErrUnknownRequest]), a request already decided
// ([approve.ErrAlreadyDecided]), or an action that is no longer the one
// the person saw, such as an edit of a file that changed meanwhile
// ([approve.ErrMismatch]).
func ResumeWithDecision(ctx context.Context, runID, requestID string, d approve.Decision, opts Options, ro ResumeOptions) (*Result, error) {
	if err := d.Validate(); err != nil {
		return nil, &Error{Kind: ErrConfig, Field: "decision", Err: err}
	}
	return resume(ctx, runID, opts, ro, &answer{requestID: requestID, decision: d})
}

// answer is a decision on a deferred request, given to a resume.
type answer struct {
	requestID string
	decision  approve.Decision
}

func resume(ctx context.Context, runID string, opts Options, ro ResumeOptions, ans *answer) (*Result, error) {
	if opts.Store == nil {
		return nil, configError("options.store", "Resume needs the store the run was recorded in")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	st := opts.Store
	fail := func(msg string, err error) error {
		return &Error{Kind: ErrResume, Message: "run " + runID + ": " + msg, Err: err}
	}
	rec, err := st.Run(ctx, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, &Error{Kind: ErrResume, Message: "no run " + runID + " in " + st.Name(), Err: err}
	case err != nil:
		return nil, readError(runID, "read run", err)
	}
	if rec.RootID != rec.ID {
		if ans == nil {
			return nil, fail(fmt.Sprintf("it is agent %s of the tree of %s, which resumes as a whole: resume %s", rec.AgentPath, rec.RootID, rec.RootID), store.ErrAgent)
		}
		// A decision on an agent's request resumes its tree.
		return resume(ctx, rec.RootID, opts, ro, ans)
	}
	task, err := storedTask(rec)
	if err != nil {
		return nil, fail(err.Error(), errors.Unwrap(err))
	}
	approvals, err := st.Approvals(ctx, runID)
	if err != nil {
		return nil, readError(runID, "read approvals", err)
	}
	var cont *Containment
	var agents []store.Run // the tree's other agents, in the order they were made
	if len(rec.Containment) > 0 {
		cont = new(Containment)
		if err := json.Unmarshal(rec.Containment, cont); err != nil {
			return nil, fail("stored containment is corrupt", err)
		}
		all, err := st.Runs(ctx, store.RunFilter{RootID: runID, Limit: -1})
		if err != nil {
			return nil, readError(runID, "read the tree's agents", err)
		}
		agents = slices.DeleteFunc(all, func(a store.Run) bool { return a.ID == runID })
	}
	stored := func() (*Result, error) {
		var out Outcome
		if err := json.Unmarshal(rec.OutcomeJSON, &out); err != nil || out.Kind == "" {
			return nil, fail("stored outcome is corrupt", err)
		}
		rules, err := decodeRemembered(rec.Remembered)
		if err != nil {
			return nil, fail("stored remembered rules are corrupt", err)
		}
		return &Result{RunID: runID, Outcome: out, Remembered: rules}, nil
	}
	// The request a decision answers: the root's own, or an agent's.
	var asked *store.Approval
	askedBy := runID
	pending := map[string]bool{} // the tree's pending requests
	findAsked := func(id string, list []store.Approval) {
		for i := range list {
			if list[i].State == store.ApprovalPending {
				pending[list[i].ID] = true
			}
			if ans != nil && list[i].ID == ans.requestID && asked == nil {
				asked, askedBy = &list[i], id
			}
		}
	}
	findAsked(runID, approvals)
	for _, ag := range agents {
		if ag.Status != store.StatusPaused {
			continue
		}
		list, err := st.Approvals(ctx, ag.ID)
		if err != nil {
			return nil, readError(ag.ID, "read approvals", err)
		}
		findAsked(ag.ID, list)
	}
	if ans != nil {
		switch {
		case asked == nil:
			return nil, fail("no approval request "+ans.requestID, approve.ErrUnknownRequest)
		case asked.State != store.ApprovalPending:
			return nil, fail(fmt.Sprintf("approval request %s was already decided (%s)", ans.requestID, asked.State), approve.ErrAlreadyDecided)
		case ans.decision.Kind == approve.Defer:
			return stored()
		}
	}
	switch rec.Status {
	case store.StatusFinished:
		res, err := stored()
		if err != nil {
			return nil, err
		}
		if res.Outcome.Kind == Success || (res.Outcome.Kind.Final() && !ro.Reopen) {
			return res, nil
		}
	case store.StatusPaused:
		// A run that waits on a request nobody has decided stays so.
		var out Outcome
		if ans == nil && json.Unmarshal(rec.OutcomeJSON, &out) == nil && pending[out.RequestID] {
			return stored()
		}
	}
	if ro.Budgets != nil {
		task.Budgets = task.Budgets.merge(*ro.Budgets)
		if err := task.Budgets.validate(); err != nil {
			return nil, err
		}
	}
	if cont != nil && ro.Containment != nil {
		*cont = cont.merge(*ro.Containment)
		if err := cont.validate("resume.containment"); err != nil {
			return nil, err
		}
	}
	if cont != nil {
		opts.Containment = cont
	}
	if err := checkPrices(task.Budgets, opts); err != nil {
		return nil, err
	}

	// One driver at a time: the lease comes before anything that costs,
	// and only while the run is as read above, which decided what to do
	// with it. A run another driver finished or moved on meanwhile is read
	// and decided again: one that has ended is never driven again.
	seen := rec.Seen()
	if opts.blindAcquire {
		seen = nil
	}
	lease, err := st.Acquire(ctx, runID, opts.owner(), opts.leaseTTL(), ro.Force, seen)
	if errors.Is(err, store.ErrChanged) {
		return resume(ctx, runID, opts, ro, ans)
	}
	if err != nil {
		var le *store.LeaseError
		if errors.As(err, &le) {
			// The holder first: a message cut short still names it.
			h := le.Holder.Owner
			return nil, &Error{Kind: ErrConflict, Message: fmt.Sprintf("run %s is being driven by pid %d on %s; wait for it, or take it over if that process is dead", runID, h.PID, h.Host), Err: err}
		}
		return nil, storeError("run "+runID+": acquire its lease", err)
	}
	released := false
	defer func() {
		if !released {
			st.Release(context.WithoutCancel(ctx), lease)
		}
	}()
	inDoubt, err := st.Recover(ctx, lease)
	if err != nil {
		return nil, storeError("run "+runID+": recover", err)
	}
	if rec, err = st.Run(ctx, runID); err != nil { // with the lost spend counted
		return nil, readError(runID, "read run", err)
	}
	if cont != nil {
		rec.Containment, _ = json.Marshal(cont) // every field encodes
	}
	base := opts.Policy
	if base == nil && len(rec.Policy) > 0 {
		p, err := policy.Parse(rec.Policy)
		if err != nil {
			return nil, fail("stored policy is corrupt", err)
		}
		base = &p
	}
	r, err := revive(ctx, st, lease, rec, task, opts, base, approvals, inDoubt)
	if err != nil {
		return nil, err
	}
	defer r.close()
	released = true // the runner holds the lease now, and releases it
	ctx = r.hold(ctx, lease)

	var t *agentTree
	var waiting []func()
	if cont != nil {
		if t, waiting, err = restoreTree(ctx, r, *cont, lease, agents, pending, askedBy, ans); err != nil {
			return nil, err
		}
		if err := t.hold(ctx, r.self); err != nil {
			return nil, err
		}
	}
	if asked != nil && askedBy == runID {
		if err := r.decide(ctx, asked, ans.decision); err != nil {
			return nil, err
		}
	}
	if err := r.authorizeProviders(ctx); err != nil {
		return nil, err
	}
	r.reportBundles()
	if err := r.connectMCP(ctx); err != nil {
		return nil, err
	}
	// The tree's agents start once the session they share is up.
	for _, start := range waiting {
		start()
	}
	return r.endTree(r.reopen(ctx, rec))
}

// readError classifies a failed read of run id: a corrupt record is a run
// that cannot be resumed; anything else is the store's failure.
func readError(id, what string, err error) error {
	if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrTooNew) {
		return &Error{Kind: ErrResume, Message: "run " + id + ": " + what, Err: err}
	}
	return storeError("run "+id+": "+what, err)
}

// storedTask decodes and validates a run's stored task.
func storedTask(rec *store.Run) (TaskContract, error) {
	var task TaskContract
	if err := json.Unmarshal(rec.Task, &task); err != nil {
		return task, fmt.Errorf("stored task is corrupt: %w", err)
	}
	if task.Version > ContractVersion {
		return task, fmt.Errorf("written by newer code (task version %d; this code reads up to %d): %w", task.Version, ContractVersion, store.ErrTooNew)
	}
	t, err := task.resolved()
	if err != nil {
		return task, fmt.Errorf("stored task is not valid here: %w", err)
	}
	return t, nil
}

// revive makes the runner that continues rec, a run whose lease (or whose
// tree's lease) is held, from its committed steps: its spend, its history,
// its calls in doubt and the decisions taken while it waited.
func revive(ctx context.Context, st store.Store, lease *store.Lease, rec *store.Run, task TaskContract, opts Options,
	base *policy.Policy, approvals []store.Approval, inDoubt []store.Intent) (*runner, error) {
	fail := func(msg string, err error) error {
		return &Error{Kind: ErrResume, Message: "run " + rec.ID + ": " + msg, Err: err}
	}
	steps, err := st.Steps(ctx, rec.ID)
	if err != nil {
		return nil, readError(rec.ID, "read steps", err)
	}
	if err := checkSteps(rec, steps); err != nil {
		return nil, fail("corrupt checkpoint: "+err.Error(), store.ErrCorrupt)
	}
	seq, err := st.LastSeq(ctx, rec.ID)
	if err != nil {
		return nil, readError(rec.ID, "read events", err)
	}
	remembered, err := decodeRemembered(rec.Remembered)
	if err != nil {
		return nil, fail("stored remembered rules are corrupt", err)
	}
	r, err := newRunner(task, opts, st)
	if err != nil {
		return nil, err
	}
	r.lease = lease
	r.runID, r.path, r.seq = rec.ID, rec.AgentPath, seq
	r.serveLive()
	r.startedAt = rec.StartedAt
	r.paused = rec.Paused
	if !rec.PausedAt.IsZero() {
		r.paused += time.Since(rec.PausedAt)
	}
	r.usage, r.cost = rec.Usage, rec.Cost
	r.lost = Spent{Usage: rec.LostUsage, Cost: rec.LostCost}
	r.history = steps
	for i := range steps {
		r.mgr.Append(&steps[i])
	}
	r.inDoubt = inDoubt
	r.setPolicy(base, remembered)
	for _, a := range approvals {
		switch a.State {
		case store.ApprovalApproved, store.ApprovalDenied, store.ApprovalRefused:
			var d approve.Decision
			if err := json.Unmarshal(a.Decision, &d); err != nil {
				r.close()
				return nil, fail("stored decision on "+a.ID+" is corrupt", err)
			}
			r.decided = append(r.decided, decided{approval: a, decision: d})
		case store.ApprovalPerformed:
			if a.Result == nil {
				r.close()
				return nil, fail("approval "+a.ID+" was carried out but its result is missing", store.ErrCorrupt)
			}
			r.pre = append(r.pre, *a.Result)
			r.applied = append(r.applied, a.ID)
		}
	}
	return r, nil
}

// reopen marks the revived run running again and drives it on from its
// last committed step.
func (r *runner) reopen(ctx context.Context, rec *store.Run) (*Result, error) {
	taskJSON, policyJSON, err := r.encodeTask()
	if err != nil {
		return nil, err
	}
	r.emit(Event{Kind: EventRunResumed, Step: rec.Steps, Provider: r.providers[0].Name(),
		Text: fmt.Sprintf("resuming at step %d; %d committed step(s) skipped", rec.Steps+1, rec.Steps)})
	if err := r.st.ReopenRun(context.WithoutCancel(ctx), r.lease, taskJSON, policyJSON, time.Now(), r.takePending()); err != nil {
		return nil, storeError("run "+r.runID+": reopen", err)
	}
	// A step that passed its gate ends the run; a driver that died before
	// it could record that left a success to record, not a step to run.
	// (A task with nothing to check, or with an output schema, ends on an
	// answer, not on its gate.)
	if n := len(r.history); n > 0 && r.history[n-1].Verified && len(r.decided) == 0 && len(r.verifiers) > 0 && r.schema == nil {
		return r.finish(ctx, Outcome{Kind: Success, Reason: "every verification check passed"}, nil)
	}
	if res, err := r.carryOut(ctx); res != nil || err != nil {
		return res, err
	}
	return r.loop(ctx, rec.Steps+1)
}

// decide records a person's decision on the request a run awaits. An
// approval is checked against the policy in force, and the action the tool
// would take now must be the one the person saw; a mismatch changes
// nothing.
func (r *runner) decide(ctx context.Context, a *store.Approval, d approve.Decision) error {
	state := store.ApprovalDenied
	reason := d.Reason
	if d.Kind == approve.Approve {
		state = store.ApprovalApproved
		final, err := storedAction(a)
		if err == nil {
			final, err = rewrite(final, d.Rewrite)
		}
		switch {
		case err != nil:
			state, reason = store.ApprovalRefused, "the approver's rewrite is refused: "+err.Error()
		case r.policy != nil:
			if v := r.explain(final); v.Effect == policy.Deny {
				r.emitVerdict(a.Step, v)
				state, reason = store.ApprovalRefused, refusal(v)
			}
		}
		if state == store.ApprovalApproved && !r.probe(ctx, a) {
			return &Error{Kind: ErrResume, Message: fmt.Sprintf("run %s: approval request %s: %s %s would not be the action that was approved; nothing was done",
				r.runID, a.ID, a.Tool, a.Target), Err: approve.ErrMismatch}
		}
		if state == store.ApprovalApproved {
			r.remember(d.Remember)
		}
	}
	if state == store.ApprovalRefused {
		d.Reason = reason // the record says why nothing was done
	}
	r.emit(Event{Kind: EventApprovalResolved, Step: a.Step, RequestID: a.ID, Decision: d.Kind, Reason: reason, Tool: a.Tool, Target: a.Target})
	data, err := json.Marshal(d)
	if err != nil {
		return wrap(ErrConfig, "encode decision", err)
	}
	if err := r.st.Decide(ctx, r.runID, a.ID, state, data, time.Now(), r.takePending()); err != nil {
		if errors.Is(err, store.ErrNotPending) {
			return &Error{Kind: ErrResume, Message: fmt.Sprintf("run %s: approval request %s was decided meanwhile", r.runID, a.ID), Err: approve.ErrAlreadyDecided}
		}
		return storeError("record decision", err)
	}
	a.State, a.Decision = state, data
	r.decided = append(r.decided, decided{approval: *a, decision: d})
	return nil
}

// checkPrices refuses a money budget that could not be enforced: with
// max_cost_usd set, every provider must know what its model costs. A
// tree's money ceiling is held to the same.
func checkPrices(b Budgets, opts Options) error {
	what := "budgets.max_cost_usd"
	if c := opts.Containment; c != nil && c.MaxCostUSD > 0 && b.MaxCostUSD == 0 {
		b.MaxCostUSD, what = c.MaxCostUSD, "containment.max_cost_usd"
	}
	if b.MaxCostUSD == 0 {
		return nil
	}
	for i, p := range append([]provider.Provider{opts.Provider}, opts.Fallbacks...) {
		field := "provider.price"
		if i > 0 {
			field = fmt.Sprintf("fallbacks[%d].price", i-1)
		}
		pr, ok := p.(provider.Pricer)
		if !ok || !pr.Price(provider.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}).Known {
			return configError(field, "%s is set, but the price of %s is unknown, so the money budget could not be enforced: "+
				"give the price (dollars per million input and output tokens), or drop the money budget", what, p.Name())
		}
	}
	return nil
}

// checkSteps verifies that the stored steps are the run's committed steps,
// numbered 1 to rec.Steps without a gap.
func checkSteps(rec *store.Run, steps []store.Step) error {
	if len(steps) != rec.Steps {
		return fmt.Errorf("the run counts %d steps but %d are stored", rec.Steps, len(steps))
	}
	for i := range steps {
		if steps[i].Step != i+1 {
			return fmt.Errorf("step %d is stored where step %d belongs", steps[i].Step, i+1)
		}
	}
	return nil
}

func (o *Options) validate() error {
	if o.Provider == nil {
		return configError("options.provider", "required")
	}
	if o.Policy != nil {
		if err := o.Policy.Validate(); err != nil {
			var pe *policy.Error
			if errors.As(err, &pe) {
				return &Error{Kind: ErrConfig, Field: "options.policy." + pe.Field, Message: pe.Reason}
			}
			return &Error{Kind: ErrConfig, Field: "options.policy", Err: err}
		}
	}
	for i, f := range o.Fallbacks {
		if f == nil {
			return configError(fmt.Sprintf("options.fallbacks[%d]", i), "nil provider")
		}
	}
	if o.Containment != nil {
		if err := o.Containment.validate("options.containment"); err != nil {
			return err
		}
	}
	if o.Git != nil {
		if err := o.Git.Validate(); err != nil {
			var ge *git.ConfigError
			if errors.As(err, &ge) {
				return configError("options.git."+ge.Field, "%s", ge.Reason)
			}
			return &Error{Kind: ErrConfig, Field: "options.git", Err: err}
		}
	}
	if o.Backoff.Base < 0 || o.Backoff.Max < 0 {
		return configError("options.backoff", "durations must not be negative")
	}
	for i, name := range o.OmitTools {
		if !tool.IsBuiltin(name) {
			return configError(fmt.Sprintf("options.omit_tools[%d]", i), "%q is not a built-in tool", name)
		}
	}
	for i, v := range o.Verifiers {
		if v == nil {
			return configError(fmt.Sprintf("options.verifiers[%d]", i), "nil verifier")
		}
	}
	seen := map[string]bool{}
	for i, t := range o.Tools {
		field := fmt.Sprintf("options.tools[%d]", i)
		if t == nil {
			return configError(field, "nil tool")
		}
		name := t.Spec().Name
		switch {
		case tool.IsBuiltin(name), tree.IsTool(name):
			return configError(field, "%q is a built-in tool's name", name)
		case seen[name]:
			return configError(field, "%q appears twice", name)
		}
		seen[name] = true
		if w, ok := t.(*tool.Wasm); ok {
			if err := w.Validate(); err != nil {
				return &Error{Kind: ErrConfig, Field: field, Err: err}
			}
		}
	}
	return nil
}

func (o *Options) store(ctx context.Context) (store.Store, func(), error) {
	if o.Store != nil {
		return o.Store, func() {}, nil
	}
	st := memory.New()
	return st, func() { st.Close() }, nil
}

// runner is one run being driven. It is used by one goroutine, but for the
// goroutine that keeps its lease (see hold).
type runner struct {
	st        store.Store
	lease     *store.Lease
	unhold    func() // stops keeping the lease and releases it
	holding   bool   // events wait in held until the run is stored
	held      []Event
	task      TaskContract
	opts      Options
	providers []provider.Provider
	active    int        // index of the provider answering now
	meter     inputMeter // bounds a request's input by the last one's count

	root  *os.Root
	sb    *runSandbox
	env   tool.Env
	tools map[string]tool.Tool
	specs []provider.ToolSpec

	// gateShadow is the run's copy of the workspace for the gates, where
	// the sandbox has no overlay (env.Shadow is exec's); closed with
	// the run.
	gateShadow *snapshot.Shadow

	runID     string
	path      string
	cur       int // the step being run
	seq       int64
	startedAt time.Time
	deadline  time.Time     // zero without a time budget
	paused    time.Duration // time spent paused, which the time budget does not count
	usage     provider.Usage
	cost      provider.Cost
	lost      Spent // spent by calls whose steps never committed
	history   []store.Step
	inDoubt   []store.Intent
	decided   []decided           // decisions on deferred requests, to carry out before the next step
	pre       []store.Observation // what the model is told before its next turn
	applied   []string            // the decided requests whose results are in pre
	pending   []Event             // events not yet written

	base            *policy.Policy // the caller's policy; nil: no gate
	policy          *policy.Policy // base with the provider and remembered layers
	remembered      []policy.Rule
	rememberedDirty bool
	lastRequest     *approve.Request

	system   string
	taskText string
	schema   *verify.Schema // the task's output schema, compiled; nil for none
	// verifiers are the gate: the task's checks, then the caller's.
	verifiers []verify.Verifier
	// mcp is the session of the run's MCP servers; nil without any.
	mcp *mcp.Client
	// emitMu serialises events: MCP servers report from their own
	// goroutines.
	emitMu sync.Mutex
	// sinks are the options' sinks and live hub; unserve stops serving
	// the run's live events.
	sinks   []Sink
	unserve func()
	// mgr keeps what the model is sent; foldUsage and foldCost are what
	// this step's fold summaries cost, committed with the step.
	mgr       window.Manager
	foldUsage provider.Usage
	foldCost  provider.Cost
	// firstToken is the time to the first streamed text of the provider
	// call under way; zero until it streams some.
	firstToken time.Duration

	gateCacheDir  string
	gateCacheMade bool

	// tree is the tree of agents the run is part of, and self the run in
	// it; both nil outside a tree.
	tree *agentTree
	self *agent
	// adopted are the children this drive has spawned or adopted.
	adopted map[string]bool
	// blocked, when set, is the outcome of the step being run: a child it
	// waited for waits for a person.
	blocked *Outcome
	// badArgs are the calls of the step being run whose arguments were not
	// JSON, by call id, with why (see wrapInvalidArguments).
	badArgs map[string]string
	// sharedMCP says mcp is the tree's session, which the root closes.
	sharedMCP bool
	// treeDeadline says deadline is the tree's time ceiling, which ends
	// the whole tree, not the run's own time budget.
	treeDeadline bool

	// reach holds what the run's git, skill and image tools need.
	reach reach
}

func newRunner(task TaskContract, opts Options, st store.Store) (*runner, error) {
	r := &runner{
		st:        st,
		task:      task,
		opts:      opts,
		providers: append([]provider.Provider{opts.Provider}, opts.Fallbacks...),
		path:      "root",
		cost:      provider.Cost{Known: true},
		tools:     map[string]tool.Tool{},
		adopted:   map[string]bool{},
	}
	dir := task.Root
	var tools []tool.Tool
	if task.SingleFile() {
		dir = filepath.Dir(task.File)
		r.env.Only = []string{filepath.Base(task.File)}
		tools = tool.SingleFile()
	} else {
		tools = append(tool.Workspace(), opts.Tools...)
		more, err := r.reachTools()
		if err != nil {
			return nil, err
		}
		tools = append(tools, more...)
	}
	tools = slices.DeleteFunc(tools, func(t tool.Tool) bool { return slices.Contains(opts.OmitTools, t.Spec().Name) })
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, wrap(ErrIO, "open workspace", err)
	}
	r.root = root
	r.env.Root = root
	r.env.Names = &snapshot.Names{} // the workspace's listings, for exec and the gates
	// The run's copies of the workspace, for a sandbox with no overlay:
	// one for exec and the wasm tools, one for the gates, so that a
	// gate's pinned files and leftovers are never what a command starts
	// from. Made now, they remove what runs killed earlier left.
	r.env.Shadow, r.gateShadow = snapshot.NewShadow(), snapshot.NewShadow()
	verify.Sweep() // what gates of a harness killed mid-gate left
	r.env.NoSync = !st.Durable()
	r.env.Programs = tool.NewPrograms(os.Getenv("PATH"), dir, os.TempDir())
	r.sb = r.newRunSandbox()
	r.env.Sandbox = r.sb
	r.env.Trusted = r.sb.Trusted()
	for _, t := range tools {
		s := t.Spec()
		r.tools[s.Name] = t
		r.specs = append(r.specs, s)
	}
	for i := range r.task.Verification {
		r.verifiers = append(r.verifiers, &r.task.Verification[i])
	}
	r.verifiers = append(r.verifiers, opts.Verifiers...)
	r.system = systemPrompt(&r.task, len(r.verifiers) > 0) + r.reach.catalog
	r.taskText = r.task.describe(opts.Verifiers)
	if opts.ContextManager != nil {
		r.mgr = opts.ContextManager(r.taskText)
	} else {
		r.mgr = window.New(r.taskText, window.Options{MaxEntry: contextObservationMax})
	}
	if len(task.OutputSchema) > 0 {
		if r.schema, err = verify.CompileSchema(task.OutputSchema); err != nil {
			return nil, configError("output_schema", "%v", err)
		}
	}
	return r, nil
}

func (r *runner) close() {
	if r.mcp != nil && !r.sharedMCP {
		r.mcp.Close()
	}
	if r.unserve != nil {
		r.unserve()
	}
	if r.unhold != nil {
		r.unhold()
	}
	r.sb.Close()
	r.env.Shadow.Close()
	r.gateShadow.Close()
	r.root.Close()
}

// emit numbers an event, hands it to the observer and queues it for the
// next write. Model deltas are live only: they are neither numbered nor
// stored, so the trace does not depend on how a provider chunked its text.
func (r *runner) emit(e Event) {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	e.RunID, e.Path = r.runID, r.path
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if e.Kind != EventModelDelta {
		r.seq++
		e.Seq = r.seq
		r.pending = append(r.pending, e)
	}
	if r.holding {
		r.held = append(r.held, e)
	} else if r.opts.Observer != nil {
		r.opts.Observer(e)
	}
	var data []byte
	for _, s := range r.sinks {
		if !s.Wants(r.runID) {
			continue
		}
		if data == nil {
			data = encodeEvent(&e)
		}
		s.Publish(r.runID, data)
	}
}

// encodeEvent is an event's JSON form.
func encodeEvent(e *Event) []byte {
	data, err := json.Marshal(e)
	if err != nil {
		// Every field of Event encodes; this cannot happen.
		data = []byte(`{"kind":"` + string(e.Kind) + `"}`)
	}
	return data
}

// serveLive makes the run's events reach its sinks, and its live hub
// serve them.
func (r *runner) serveLive() {
	r.sinks = r.opts.Sinks
	if h := r.opts.Live; h != nil {
		r.sinks = append(slices.Clip(r.sinks), h)
		r.unserve = h.Serve(r.runID, r)
	}
}

// Attach implements watch.Source: a watcher that attaches mid-step
// starts from the events the store does not hold yet.
func (r *runner) Attach(attach func()) [][]byte {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	attach()
	out := make([][]byte, len(r.pending))
	for i := range r.pending {
		out[i] = encodeEvent(&r.pending[i])
	}
	return out
}

// deliverHeld gives the observer the events that waited for the run to be
// stored, and stops holding them.
func (r *runner) deliverHeld() {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.holding = false
	if r.opts.Observer != nil {
		for _, e := range r.held {
			r.opts.Observer(e)
		}
	}
	r.held = nil
}

// takePending returns the queued events, encoded for the store, and
// empties the queue.
func (r *runner) takePending() []store.Event {
	return r.takePendingOf(nil)
}

// takePendingOf is takePending for the events of a step about to commit:
// an event that only repeats what the step's record holds (the model's
// text, a call's arguments, a result's preview) is stored without it, and
// ReadTrace fills it back in from the step. The encoding is the event log's
// main cost; the step's content is written once, in the step.
func (r *runner) takePendingOf(st *store.Step) []store.Event {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	out := make([]store.Event, len(r.pending))
	for i, e := range r.pending {
		if st != nil && e.Step == st.Step {
			thin(&e, st)
		}
		data := encodeEvent(&e)
		out[i] = store.Event{Seq: e.Seq, Step: e.Step, Kind: string(e.Kind), At: e.At, Data: data}
	}
	r.pending = nil
	return out
}
