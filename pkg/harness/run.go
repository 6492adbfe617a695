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
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
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
	taskJSON, err := json.Marshal(r.task)
	if err != nil {
		return nil, wrap(ErrConfig, "encode task", err)
	}
	r.emit(Event{Kind: EventRunStarted, Provider: r.providers[0].Name(), Text: r.task.Goal})
	if err := st.CreateRun(ctx, &store.Run{ID: r.runID, AgentPath: r.path, Task: taskJSON,
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
// Resuming a run whose outcome is final (see [OutcomeKind.Final]) returns
// that outcome without calling the provider, unless opts.Reopen asks to
// drive an escalated or cancelled run again. A run that ran out of a
// budget continues when opts.Budgets raises it, and otherwise reports the
// same outcome again at no cost.
//
// # Errors
//
// An unknown run, a corrupt checkpoint or one written by newer code is an
// *Error of kind ErrResume; it never panics.
func Resume(ctx context.Context, runID string, opts Options) (*Result, error) {
	if opts.Store == nil {
		return nil, configError("options.store", "Resume needs the store the run was recorded in")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	st := opts.Store
	rec, err := st.Run(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &Error{Kind: ErrResume, Message: "no run " + runID + " in " + st.Path(), Err: err}
	}
	if err != nil {
		return nil, wrap(ErrResume, "read run "+runID, err)
	}
	var task TaskContract
	if err := json.Unmarshal(rec.Task, &task); err != nil {
		return nil, wrap(ErrResume, "run "+runID+": stored task is corrupt", err)
	}
	if task.Version > ContractVersion {
		return nil, &Error{Kind: ErrResume, Message: fmt.Sprintf("run %s was written by newer code (task version %d; this code reads up to %d)",
			runID, task.Version, ContractVersion), Err: store.ErrTooNew}
	}
	if err := task.Validate(); err != nil {
		return nil, wrap(ErrResume, "run "+runID+": stored task is not valid here", err)
	}
	if rec.Status == store.StatusFinished {
		var out Outcome
		if err := json.Unmarshal(rec.OutcomeJSON, &out); err != nil || out.Kind == "" {
			return nil, &Error{Kind: ErrResume, Message: "run " + runID + ": stored outcome is corrupt", Err: err}
		}
		if out.Kind == Success || (out.Kind.Final() && !opts.Reopen) {
			return &Result{RunID: runID, Outcome: out}, nil
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
		return nil, wrap(ErrResume, "run "+runID+": read steps", err)
	}
	if err := checkSteps(rec, steps); err != nil {
		return nil, &Error{Kind: ErrResume, Message: "run " + runID + ": corrupt checkpoint: " + err.Error(), Err: store.ErrCorrupt}
	}
	seq, err := st.LastSeq(ctx, runID)
	if err != nil {
		return nil, wrap(ErrResume, "run "+runID+": read events", err)
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
	taskJSON, err := json.Marshal(r.task)
	if err != nil {
		return nil, wrap(ErrConfig, "encode task", err)
	}
	r.emit(Event{Kind: EventRunResumed, Step: rec.Steps, Provider: r.providers[0].Name(),
		Text: fmt.Sprintf("resuming at step %d; %d committed step(s) skipped", rec.Steps+1, rec.Steps)})
	if err := st.ReopenRun(ctx, runID, taskJSON, r.takePending()); err != nil {
		return nil, wrap(ErrState, "reopen run", err)
	}
	return r.loop(ctx, rec.Steps+1)
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
	for i, f := range o.Fallbacks {
		if f == nil {
			return configError(fmt.Sprintf("options.fallbacks[%d]", i), "nil provider")
		}
	}
	if o.Backoff.Base < 0 || o.Backoff.Max < 0 {
		return configError("options.backoff", "durations must not be negative")
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
	env   tool.Env
	tools map[string]tool.Tool
	specs []provider.ToolSpec

	runID     string
	path      string
	seq       int64
	startedAt time.Time
	deadline  time.Time // zero without a time budget
	usage     provider.Usage
	cost      provider.Cost
	history   []store.Step
	inDoubt   []store.Intent
	pending   []store.Event // events not yet written

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
		tools = tool.Workspace()
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, wrap(ErrIO, "open workspace", err)
	}
	r.root = root
	r.env.Root = root
	for _, t := range tools {
		s := t.Spec()
		r.tools[s.Name] = t
		r.specs = append(r.specs, s)
	}
	r.system = systemPrompt(&r.task)
	r.taskText = r.task.describe()
	return r, nil
}

func (r *runner) close() { r.root.Close() }

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
