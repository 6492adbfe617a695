package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Options is the Go-side wiring of a run: the things that are not data.
type Options struct {
	// Provider answers the model turns. Required.
	Provider provider.Provider
	// Fallbacks are tried in order when the provider escalates (its
	// retries are used up, or it fails in a way retrying cannot fix).
	// Once a fallback has answered, the run stays on it.
	Fallbacks []provider.Provider
	// Store records the trace. Nil means a fresh in-memory store that is
	// closed when the call returns; Resume requires one.
	Store *store.Store
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
	// Tools are tools the caller registers beside the built-in ones, such
	// as *tool.Wasm modules. A workspace task offers them; every call is
	// first checked against the exec policy on the tool's name. A name
	// may not be a built-in tool's or appear twice.
	Tools []tool.Tool

	// Budgets, on Resume only, replaces the stored budgets: this is how a
	// run that ran out of steps, time, tokens or money continues.
	Budgets *Budgets
	// Reopen, on Resume only, drives a run whose outcome is escalated or
	// cancelled again. A successful run is never driven again.
	Reopen bool
}

// Backoff is the retry schedule: Base doubled per retry, capped at Max,
// less up to a quarter of jitter. A provider's Retry-After replaces it.
type Backoff struct {
	// Base is the first wait; zero means 500ms.
	Base Duration `json:"base,omitempty"`
	// Max caps the wait; zero means 30s.
	Max Duration `json:"max,omitempty"`
}

// Run validates task, records a new run in the store and drives it to an
// outcome. Every outcome, success or not, is a Result; an error means the
// run could not be driven at all.
//
// # Errors
//
// A bad task or option is an *Error of kind ErrConfig naming its field; a
// workspace that cannot be opened is ErrIO; a store failure is ErrState.
func Run(ctx context.Context, task TaskContract, opts Options) (*Result, error) {
	if err := task.Validate(); err != nil {
		return nil, err
	}
	if opts.Budgets != nil || opts.Reopen {
		return nil, configError("options", "Budgets and Reopen apply to Resume; a new run takes its budgets from the task")
	}
	if err := opts.validate(); err != nil {
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
	r.runID = newRunID()
	r.startedAt = time.Now()
	r.setPolicy(opts.Policy, nil)
	taskJSON, err := json.Marshal(r.task)
	if err != nil {
		return nil, wrap(ErrConfig, "encode task", err)
	}
	var policyJSON json.RawMessage
	if opts.Policy != nil {
		if policyJSON, err = json.Marshal(opts.Policy); err != nil {
			return nil, wrap(ErrConfig, "encode policy", err)
		}
	}
	r.emit(Event{Kind: EventRunStarted, Provider: r.providers[0].Name(), Text: r.task.Goal})
	if err := r.authorizeProviders(ctx); err != nil {
		return nil, err
	}
	// A run whose start an observer has seen is stored even if the caller
	// cancels now; the loop then ends it cancelled.
	if err := st.CreateRun(context.WithoutCancel(ctx), &store.Run{ID: r.runID, AgentPath: r.path, Task: taskJSON, Policy: policyJSON,
		Provider: r.providers[0].Name(), StartedAt: r.startedAt}, r.takePending()); err != nil {
		return nil, wrap(ErrState, "create run", err)
	}
	return r.loop(ctx, 1)
}

// Resume continues a run from its last committed step, under its original
// id. Committed steps are not run again; tokens and money are restored from
// the store; the time budget counts wall-clock time since the run first
// started, downtime included. An effect that was not idempotent and whose
// step never committed is reported to the model as in doubt, not repeated
// blindly.
//
// The run keeps its permission boundary: opts.Policy when set (it then
// replaces the stored one), else the policy the run was started with.
//
// Resuming a run whose outcome is final (see [OutcomeKind.Final]) returns
// that outcome without calling the provider, unless opts.Reopen asks to
// drive an escalated or cancelled run again. A run that ran out of a
// budget continues when opts.Budgets raises it, and otherwise reports the
// same outcome again at no cost. A run awaiting approval stays so: answer
// it with [ResumeWithDecision].
//
// # Errors
//
// An unknown run, a corrupt checkpoint or one written by newer code is an
// *Error of kind ErrResume; it never panics. A provider the policy now
// refuses is ErrRefused.
func Resume(ctx context.Context, runID string, opts Options) (*Result, error) {
	return resume(ctx, runID, opts, nil)
}

// ResumeWithDecision answers the approval request a run awaits, in any
// process that opens the run's store, and continues the run.
//
// The decision is carried out at the start of the next step and told to
// the model. An approval is checked against the policy again (the one in
// opts, or the run's), so a deny added while the decision waited still
// holds; then exactly the persisted action is performed — the action the
// person saw, with its hash — or its rewrite. A denial becomes an
// observation. A deferral leaves the run waiting.
//
// # Errors
//
// Anything that does not match fails closed with an *Error of kind
// ErrResume and does nothing: an unknown request id
// ([approve.ErrUnknownRequest]), a request already decided
// ([approve.ErrAlreadyDecided]), or an action that is no longer the one
// the person saw, such as an edit of a file that changed meanwhile
// ([approve.ErrMismatch]).
func ResumeWithDecision(ctx context.Context, runID, requestID string, d approve.Decision, opts Options) (*Result, error) {
	if err := d.Validate(); err != nil {
		return nil, &Error{Kind: ErrConfig, Field: "decision", Err: err}
	}
	return resume(ctx, runID, opts, &answer{requestID: requestID, decision: d})
}

// answer is a decision on a deferred request, given to a resume.
type answer struct {
	requestID string
	decision  approve.Decision
}

func resume(ctx context.Context, runID string, opts Options, ans *answer) (*Result, error) {
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
	if errors.Is(err, store.ErrNotFound) {
		return nil, &Error{Kind: ErrResume, Message: "no run " + runID + " in " + st.Path(), Err: err}
	}
	if err != nil {
		return nil, fail("read run", err)
	}
	var task TaskContract
	if err := json.Unmarshal(rec.Task, &task); err != nil {
		return nil, fail("stored task is corrupt", err)
	}
	if task.Version > ContractVersion {
		return nil, fail(fmt.Sprintf("written by newer code (task version %d; this code reads up to %d)", task.Version, ContractVersion), store.ErrTooNew)
	}
	if err := task.Validate(); err != nil {
		return nil, fail("stored task is not valid here", err)
	}
	approvals, err := st.Approvals(ctx, runID)
	if err != nil {
		return nil, fail("read approvals", err)
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
	var asked *store.Approval
	if ans != nil {
		i := slices.IndexFunc(approvals, func(a store.Approval) bool { return a.ID == ans.requestID })
		switch {
		case i < 0:
			return nil, fail("no approval request "+ans.requestID, approve.ErrUnknownRequest)
		case approvals[i].State != store.ApprovalPending:
			return nil, fail(fmt.Sprintf("approval request %s was already decided (%s)", ans.requestID, approvals[i].State), approve.ErrAlreadyDecided)
		case ans.decision.Kind == approve.Defer:
			return stored()
		}
		asked = &approvals[i]
	}
	switch rec.Status {
	case store.StatusFinished:
		res, err := stored()
		if err != nil {
			return nil, err
		}
		if res.Outcome.Kind == Success || (res.Outcome.Kind.Final() && !opts.Reopen) {
			return res, nil
		}
	case store.StatusPaused:
		if ans == nil && slices.ContainsFunc(approvals, func(a store.Approval) bool { return a.State == store.ApprovalPending }) {
			return stored()
		}
	}
	if opts.Budgets != nil {
		task.Budgets = *opts.Budgets
		if err := task.Budgets.validate(); err != nil {
			return nil, err
		}
	}

	steps, err := st.Steps(ctx, runID)
	if err != nil {
		return nil, fail("read steps", err)
	}
	if err := checkSteps(rec, steps); err != nil {
		return nil, fail("corrupt checkpoint: "+err.Error(), store.ErrCorrupt)
	}
	seq, err := st.LastSeq(ctx, runID)
	if err != nil {
		return nil, fail("read events", err)
	}
	base := opts.Policy
	if base == nil && len(rec.Policy) > 0 {
		p, err := policy.Parse(rec.Policy)
		if err != nil {
			return nil, fail("stored policy is corrupt", err)
		}
		base = &p
	}
	remembered, err := decodeRemembered(rec.Remembered)
	if err != nil {
		return nil, fail("stored remembered rules are corrupt", err)
	}
	inDoubt, err := st.InDoubt(ctx, runID)
	if err != nil {
		return nil, wrap(ErrState, "run "+runID+": read intents", err)
	}

	r, err := newRunner(task, opts, st)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.runID, r.path, r.seq = runID, rec.AgentPath, seq
	r.startedAt = rec.StartedAt
	r.usage, r.cost = rec.Usage, rec.Cost
	r.history = steps
	r.inDoubt = inDoubt
	r.setPolicy(base, remembered)
	for _, a := range approvals {
		switch a.State {
		case store.ApprovalApproved, store.ApprovalDenied, store.ApprovalRefused:
			var d approve.Decision
			if err := json.Unmarshal(a.Decision, &d); err != nil {
				return nil, fail("stored decision on "+a.ID+" is corrupt", err)
			}
			r.decided = append(r.decided, decided{approval: a, decision: d})
		}
	}
	if asked != nil {
		if err := r.decide(ctx, asked, ans.decision); err != nil {
			return nil, err
		}
	}
	if err := r.authorizeProviders(ctx); err != nil {
		return nil, err
	}
	taskJSON, err := json.Marshal(r.task)
	if err != nil {
		return nil, wrap(ErrConfig, "encode task", err)
	}
	var policyJSON json.RawMessage
	if base != nil {
		if policyJSON, err = json.Marshal(base); err != nil {
			return nil, wrap(ErrConfig, "encode policy", err)
		}
	}
	r.emit(Event{Kind: EventRunResumed, Step: rec.Steps, Provider: r.providers[0].Name(),
		Text: fmt.Sprintf("resuming at step %d; %d committed step(s) skipped", rec.Steps+1, rec.Steps)})
	if err := st.ReopenRun(ctx, runID, taskJSON, policyJSON, r.takePending()); err != nil {
		return nil, wrap(ErrState, "reopen run", err)
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
		final := rewrite(tool.Action{Act: policy.Act(a.Act), Target: a.Target, Content: a.Content}, d.Rewrite)
		if r.policy != nil {
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
		return wrap(ErrState, "record decision", err)
	}
	a.State, a.Decision = state, data
	r.decided = append(r.decided, decided{approval: *a, decision: d})
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
	if o.Backoff.Base < 0 || o.Backoff.Max < 0 {
		return configError("options.backoff", "durations must not be negative")
	}
	seen := map[string]bool{}
	for i, t := range o.Tools {
		field := fmt.Sprintf("options.tools[%d]", i)
		if t == nil {
			return configError(field, "nil tool")
		}
		name := t.Spec().Name
		switch {
		case tool.IsBuiltin(name):
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

func (o *Options) store(ctx context.Context) (*store.Store, func(), error) {
	if o.Store != nil {
		return o.Store, func() {}, nil
	}
	st, err := store.OpenMemory(ctx)
	if err != nil {
		return nil, nil, wrap(ErrState, "open in-memory store", err)
	}
	return st, func() { st.Close() }, nil
}

// newRunID returns a time-ordered random id: 12 hex digits of Unix
// milliseconds and 10 of randomness.
func newRunID() string {
	var b [11]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	rand.Read(b[6:])
	return "run_" + hex.EncodeToString(b[:])
}

// runner is one run being driven. It is used by one goroutine.
type runner struct {
	st        *store.Store
	task      TaskContract
	opts      Options
	providers []provider.Provider
	active    int // index of the provider answering now

	root  *os.Root
	sb    *Sandbox
	env   tool.Env
	tools map[string]tool.Tool
	specs []provider.ToolSpec

	runID     string
	path      string
	cur       int // the step being run
	seq       int64
	startedAt time.Time
	deadline  time.Time // zero without a time budget
	usage     provider.Usage
	cost      provider.Cost
	history   []store.Step
	inDoubt   []store.Intent
	decided   []decided           // decisions on deferred requests, to carry out next step
	pre       []store.Observation // what the model is told before the current step's turn
	pending   []store.Event       // events not yet written

	base            *policy.Policy // the caller's policy; nil: no gate
	policy          *policy.Policy // base with the provider and remembered layers
	remembered      []policy.Rule
	rememberedDirty bool
	lastRequest     *approve.Request

	system   string
	taskText string
}

func newRunner(task TaskContract, opts Options, st *store.Store) (*runner, error) {
	r := &runner{
		st:        st,
		task:      task,
		opts:      opts,
		providers: append([]provider.Provider{opts.Provider}, opts.Fallbacks...),
		path:      "root",
		cost:      provider.Cost{Known: true},
		tools:     map[string]tool.Tool{},
	}
	dir := task.Root
	var tools []tool.Tool
	if task.SingleFile() {
		dir = filepath.Dir(task.File)
		r.env.Only = []string{filepath.Base(task.File)}
		tools = tool.SingleFile()
	} else {
		tools = append(tool.Workspace(), opts.Tools...)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, wrap(ErrIO, "open workspace", err)
	}
	r.root = root
	r.env.Root = root
	r.sb = r.newRunSandbox()
	r.env.Sandbox = r.sb
	for _, t := range tools {
		s := t.Spec()
		r.tools[s.Name] = t
		r.specs = append(r.specs, s)
	}
	r.system = systemPrompt(&r.task)
	r.taskText = r.task.describe()
	return r, nil
}

func (r *runner) close() {
	r.sb.Close()
	r.root.Close()
}

// emit numbers an event, hands it to the observer and queues it for the
// next write. Model deltas are live only: they are neither numbered nor
// stored, so the trace does not depend on how a provider chunked its text.
func (r *runner) emit(e Event) {
	e.RunID, e.Path = r.runID, r.path
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if e.Kind != EventModelDelta {
		r.seq++
		e.Seq = r.seq
		data, err := json.Marshal(&e)
		if err != nil {
			// Every field of Event encodes; this cannot happen.
			data = []byte(`{"kind":"` + string(e.Kind) + `"}`)
		}
		r.pending = append(r.pending, store.Event{Seq: e.Seq, Step: e.Step, Kind: string(e.Kind), At: e.At, Data: data})
	}
	if r.opts.Observer != nil {
		r.opts.Observer(e)
	}
}

// takePending returns the queued events and empties the queue.
func (r *runner) takePending() []store.Event {
	p := r.pending
	r.pending = nil
	return p
}
