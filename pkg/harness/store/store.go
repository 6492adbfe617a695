// Package store is the contract of the harness's durable trace: what a run
// is driven on, and what readers read back. Implementations live in their
// own packages — [github.com/initorigin/io-harness-go/pkg/harness/store/sqlite]
// is the embedded default — and prove themselves against the conformance
// suite in package storetest, as database/sql drivers do.
//
// # The write protocol
//
// One process drives a run at a time. It holds the run's [Lease], got
// from [Store.CreateRun] or [Store.Acquire] and kept alive with
// [Store.Renew]. Every write a driver makes names its lease; a lease that
// another driver has since taken (its generation is no longer the run's)
// makes the write fail with [ErrFenced] and change nothing, so a
// superseded driver's work lands nowhere.
//
// A step is committed in one transaction with its assistant turn, its
// observations, its provider attempts and spend, its budget draw, its
// events and, when the step ends the run, the outcome: after
// [Store.CommitStep] returns the step is done, and before it the step
// never happened. An effect that is not idempotent writes an intent
// first ([Store.OpenIntent]); provider spend is recorded as each call
// completes ([Store.RecordSpend]). [Store.Recover] turns what a dead
// driver left open into in-doubt intents and lost spend.
//
// A tree of agents is driven under one lease, its root's: an agent is a
// run created by [Store.CreateAgent] with its root's id, and every write
// for it names the root's lease through [Lease.For]. A write for a run of
// another tree is fenced out.
//
// Approval decisions need no lease: any process may answer a paused run
// ([Store.Decide]); exactly one decision succeeds.
//
// Nothing in a store holds a secret: callers store contracts and
// provider names, never keys, headers or credentials.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// Reader reads runs back. It never changes the store.
type Reader interface {
	// Run returns one run; an unknown id wraps ErrNotFound.
	Run(ctx context.Context, id string) (*Run, error)
	// Runs lists runs, newest first.
	Runs(ctx context.Context, f RunFilter) ([]Run, error)
	// Steps returns a run's committed steps in order, each with its
	// observations and attempts.
	Steps(ctx context.Context, runID string) ([]Step, error)
	// Events returns a run's stored events with a sequence number above
	// after, in order, at most limit of them (zero means all); LastSeq
	// the highest sequence number stored, or 0.
	Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error)
	LastSeq(ctx context.Context, runID string) (int64, error)
	// Attempts returns the provider calls of a run that belong to no
	// committed step: those of the call that ended the run (an
	// escalation's retries) and of steps a crash cut short.
	Attempts(ctx context.Context, runID string) ([]Attempt, error)
	// Approvals returns a run's approval requests in the order they were
	// made; Approval one of them (an unknown id wraps ErrNotFound).
	Approvals(ctx context.Context, runID string) ([]Approval, error)
	Approval(ctx context.Context, runID, id string) (*Approval, error)
	// Lease returns who drives the run now; nil when nobody holds it.
	Lease(ctx context.Context, runID string) (*Lease, error)
	// Name says where the store is, for messages: a file path, or
	// ":memory:". It never holds a credential.
	Name() string
	// Durable reports whether a commit outlives the process: false for a
	// store in memory, whose runs the harness does not wait on the disk
	// for (workspace writes are not synced).
	Durable() bool
	// Close releases the store. It is idempotent.
	Close() error
}

// Store is a trace a run can be driven on: a [Reader] with the write
// protocol of the package doc.
type Store interface {
	Reader

	// CreateRun inserts a new run in status running, with its first
	// events, and gives its creator the lease.
	CreateRun(ctx context.Context, r *Run, events []Event, owner Owner, ttl time.Duration) (*Lease, error)
	// CreateAgent inserts an agent of the tree l leases: r.ParentID is a
	// run of that tree, r.RootID is l's run, and r.Status is StatusQueued
	// or StatusRunning. It has no lease of its own.
	CreateAgent(ctx context.Context, l *Lease, r *Run, events []Event) error
	// Acquire takes a run's lease for a new driver. A lease held by a
	// live owner is an error wrapping ErrConflict (a *LeaseError naming
	// the holder) unless force is set; a lease whose owner is dead (on
	// the same host: its process is gone; elsewhere: it expired) is
	// taken over. Taking over raises the generation, fencing the former
	// holder out.
	//
	// A driver decides what to do with a run on what it read of it
	// before it takes the lease; when seen is not nil, the lease is taken
	// only while the run is still as seen says, checked in the
	// transaction that takes it. A run that has changed meanwhile — a
	// driver the caller read as lapsed finished it, or committed a step —
	// is an error wrapping ErrChanged, and nothing changes.
	Acquire(ctx context.Context, runID string, owner Owner, ttl time.Duration, force bool, seen *Seen) (*Lease, error)
	// Renew extends a held lease by its ttl; ErrFenced when it was taken.
	Renew(ctx context.Context, l *Lease) error
	// Release gives a lease up; releasing one already taken is not an
	// error.
	Release(ctx context.Context, l *Lease) error

	// ReopenRun marks the run l writes for (l.Target()) running again,
	// for a resume or a queued agent's start: its outcome is cleared, its
	// task and policy replaced, and the time it spent paused since it last
	// paused added to its paused total.
	ReopenRun(ctx context.Context, l *Lease, task, policy json.RawMessage, at time.Time, events []Event) error
	// Recover makes what a dead driver left open in the run l writes for
	// known: every open intent becomes in doubt and every spend of an
	// uncommitted step becomes lost. It returns the run's in-doubt
	// intents not yet reported.
	Recover(ctx context.Context, l *Lease) ([]Intent, error)
	// OpenIntent records, durably and at once, that an effect which is
	// not idempotent is about to start, and returns the intent's id.
	OpenIntent(ctx context.Context, l *Lease, in *Intent) (int64, error)
	// RecordSpend records, durably and at once, what one provider call
	// that completed cost, before its step commits. Unlike every other
	// write, a fenced driver's spend is not dropped: the provider served
	// the call, so it is added to the run's lost spend (for a run of the
	// lease's tree), which every budget counts, and the call returns
	// ErrFenced.
	RecordSpend(ctx context.Context, l *Lease, sp *Spend) error
	// CommitStep writes one step in one transaction (see [Commit]). The
	// step number must be the run's next one, else ErrConflict.
	CommitStep(ctx context.Context, l *Lease, c *Commit) error
	// FinishRun records a run's outcome.
	FinishRun(ctx context.Context, l *Lease, f *Finish) error
	// RecordDecisions writes what carrying out decided approvals came to,
	// before the model is told in a step (see [Performed]).
	RecordDecisions(ctx context.Context, l *Lease, p []Performed, events []Event) error

	// Decide records a decision on a pending approval request; a request
	// that is not pending is ErrNotPending and nothing changes. It needs
	// no lease.
	Decide(ctx context.Context, runID, id string, state ApprovalState, decision json.RawMessage, at time.Time, events []Event) error
}

var (
	// ErrNotFound reports a run, or an approval, the store does not hold.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict reports a write that lost to another driver of the
	// same run, or a lease another live driver holds.
	ErrConflict = errors.New("store: the run is driven by another writer")
	// ErrFenced reports a write made with a lease another driver has
	// since taken over. It wraps ErrConflict.
	ErrFenced = fmt.Errorf("%w: this driver's lease was taken over", ErrConflict)
	// ErrChanged reports a lease refused because the run is no longer as
	// the caller read it (see [Store.Acquire]): read it again and decide
	// again. It wraps ErrConflict.
	ErrChanged = fmt.Errorf("%w: the run changed since it was read", ErrConflict)
	// ErrTooNew reports a store written by newer code.
	ErrTooNew = errors.New("store: written by a newer version")
	// ErrTooOld reports a store of an older schema that a reader cannot
	// read as it is and will not migrate: opening it for writing
	// migrates it.
	ErrTooOld = errors.New("store: written by an older version")
	// ErrCorrupt reports a file that is not a usable store.
	ErrCorrupt = errors.New("store: not a valid store")
	// ErrClosed reports use of a closed store.
	ErrClosed = errors.New("store: closed")
	// ErrAgent reports a lease asked for an agent of a tree: its root's
	// lease covers it.
	ErrAgent = errors.New("store: the run is an agent of a tree")
	// ErrNotPending reports a decision on an approval request that is
	// not waiting for one.
	ErrNotPending = errors.New("store: the approval request is not pending")
	// ErrUnavailable reports a store the environment keeps from being
	// opened or written: a missing directory, a read-only or full
	// filesystem, a path that is a directory, a busy database.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrReadOnly reports a write on a store opened for reading.
	ErrReadOnly = errors.New("store: opened read-only")
)

// SchemaError describes a store whose schema this code cannot use.
type SchemaError struct {
	Path      string // where the store is
	Found     int    // its schema version
	Supported int    // the newest version this code reads
}

// Error implements error.
func (e *SchemaError) Error() string {
	if e.Found < e.Supported {
		return fmt.Sprintf("store: %s has schema version %d, older than this code's %d", e.Path, e.Found, e.Supported)
	}
	return fmt.Sprintf("store: %s has schema version %d; this code reads up to %d", e.Path, e.Found, e.Supported)
}

// Is makes errors.Is(err, ErrTooNew) true for a newer schema, and
// errors.Is(err, ErrTooOld) for an older one.
func (e *SchemaError) Is(target error) bool {
	return target == ErrTooNew && e.Found > e.Supported || target == ErrTooOld && e.Found < e.Supported
}

// LeaseError is a lease another driver holds.
type LeaseError struct {
	RunID  string
	Holder Lease
}

// Error implements error.
func (e *LeaseError) Error() string {
	h := e.Holder.Owner
	return fmt.Sprintf("store: run %s is driven by %s (pid %d, since %s, lease generation %d, expires %s)",
		e.RunID, h.Host, h.PID, h.Started.Format(time.RFC3339), e.Holder.Generation, e.Holder.Expires.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *LeaseError) Is(target error) bool { return target == ErrConflict }

// Status is where a run stands.
type Status string

const (
	// StatusQueued is a run that waits to be driven and has run no step:
	// one submitted to a fleet's queue (package fleet) that no worker has
	// claimed, the time it waits counting as paused, or an agent of a tree
	// waiting for one of the tree's concurrency slots. The first driver's
	// ReopenRun makes it running.
	StatusQueued Status = "queued"
	// StatusRunning is a run being driven, or one whose driver died.
	StatusRunning Status = "running"
	// StatusPaused is a run waiting for something outside the process,
	// such as a person's decision.
	StatusPaused Status = "paused"
	// StatusFinished is a run that reached an outcome.
	StatusFinished Status = "finished"
)

// NewRunID returns a new run id: "run_" and 22 hex digits, 12 of Unix
// milliseconds and 10 of randomness, so that ids sort by creation time.
func NewRunID() string {
	var b [11]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	rand.Read(b[6:])
	return "run_" + hex.EncodeToString(b[:])
}

// Run is one run's record.
type Run struct {
	ID       string `json:"id"`
	ParentID string `json:"parent_id,omitempty"`
	// RootID is the id of the root of the run's tree of agents: the run's
	// own id for a run that is no agent of another.
	RootID    string          `json:"root_id,omitempty"`
	AgentPath string          `json:"agent_path"`
	Task      json.RawMessage `json:"task"`
	Provider  string          `json:"provider"`
	Status    Status          `json:"status"`
	// Outcome is the outcome's name, empty while the run has none.
	Outcome string `json:"outcome,omitempty"`
	// OutcomeJSON is the whole outcome as the harness recorded it.
	OutcomeJSON json.RawMessage `json:"outcome_json,omitempty"`
	StartedAt   time.Time       `json:"started_at"`
	FinishedAt  time.Time       `json:"finished_at,omitzero"`
	// Steps is the number of committed steps; the last one's number.
	Steps int `json:"steps"`
	// Usage and Cost are the committed steps' spend.
	Usage provider.Usage `json:"usage"`
	Cost  provider.Cost  `json:"cost"`
	// LostUsage and LostCost are what provider calls cost whose steps
	// never committed (a crash between the answer and the commit): paid
	// for, counted in every budget, in no step.
	LostUsage provider.Usage `json:"lost_usage,omitzero"`
	LostCost  provider.Cost  `json:"lost_cost,omitzero"`
	// Paused is the time the run has spent paused, waiting for a person,
	// not counting a pause still going on (see PausedAt).
	Paused time.Duration `json:"paused,omitempty"`
	// PausedAt is when the run last paused, while it is paused.
	PausedAt time.Time `json:"paused_at,omitzero"`
	// Policy is the policy the run runs under, as JSON; empty for none.
	Policy json.RawMessage `json:"policy,omitempty"`
	// Remembered are the rules approvers asked the run to remember, as a
	// JSON array; empty for none.
	Remembered json.RawMessage `json:"remembered,omitempty"`
	// Containment is the caps of the tree a root run drives, as JSON;
	// empty for a run that spawns no agents.
	Containment json.RawMessage `json:"containment,omitempty"`
}

// Seen is what a driver read of a run before it took the run's lease: the
// run's status, its outcome's name and its committed steps. Every write
// that can change what a driver decides to do with a run changes one of
// them.
type Seen struct {
	Status  Status
	Outcome string
	Steps   int
}

// Seen is what r says of its run, for [Store.Acquire].
func (r *Run) Seen() *Seen { return &Seen{Status: r.Status, Outcome: r.Outcome, Steps: r.Steps} }

// Check returns nil when a run now in status, with outcome and steps, is
// still as s says, and otherwise an error wrapping ErrChanged that says
// what changed.
func (s *Seen) Check(runID string, status Status, outcome string, steps int) error {
	if s == nil || (s.Status == status && s.Outcome == outcome && s.Steps == steps) {
		return nil
	}
	return fmt.Errorf("%w: run %s was read %s (%q, %d steps) and is now %s (%q, %d steps)",
		ErrChanged, runID, s.Status, s.Outcome, s.Steps, status, outcome, steps)
}

// RunFilter selects runs for [Reader.Runs].
type RunFilter struct {
	// ParentID, when set, selects that run's children.
	ParentID string `json:"parent_id,omitempty"`
	// RootID, when set, selects every run of that root's tree, the root
	// included, in the order they were created.
	RootID string `json:"root_id,omitempty"`
	// Roots selects runs that are no agent of another.
	Roots bool `json:"roots,omitempty"`
	// Limit caps the number of runs; zero means 100, and a negative
	// limit none.
	Limit int `json:"limit,omitempty"`
}

// Event is one stored trace event. Data is the event's whole JSON form;
// the other fields are indexed copies of parts of it.
type Event struct {
	Seq  int64           `json:"seq"`
	Step int             `json:"step"`
	Kind string          `json:"kind"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data"`
}

// Attempt is one provider call: a success, a retried failure, or the
// failure that made the harness fall back or escalate.
type Attempt struct {
	Step      int           `json:"step"`
	Attempt   int           `json:"attempt"`
	Provider  string        `json:"provider"`
	ErrorKind string        `json:"error_kind,omitempty"`
	Error     string        `json:"error,omitempty"`
	Status    int           `json:"status,omitempty"`
	Latency   time.Duration `json:"latency"`
	Wait      time.Duration `json:"wait,omitempty"`
	At        time.Time     `json:"at"`
}

// Spend is what one provider call that completed cost.
type Spend struct {
	RunID    string         `json:"run_id"`
	Step     int            `json:"step"`
	Attempt  int            `json:"attempt"`
	Provider string         `json:"provider"`
	Usage    provider.Usage `json:"usage"`
	Cost     provider.Cost  `json:"cost"`
	At       time.Time      `json:"at"`
}

// ObservationKind says where an observation came from.
type ObservationKind string

const (
	// ObservationTool is the result of one tool call.
	ObservationTool ObservationKind = "tool"
	// ObservationNote is a message from the harness to the model after
	// its turn, such as the reminder that follows a turn without a tool
	// call.
	ObservationNote ObservationKind = "note"
	// ObservationVerification is the verification gate's feedback.
	ObservationVerification ObservationKind = "verification"
	// ObservationInDoubt tells the model, before its turn, which effects
	// of an earlier attempt at the step may or may not have happened.
	ObservationInDoubt ObservationKind = "in_doubt"
	// ObservationDecision tells the model, before its turn, what a
	// person decided about an action that waited for them, and what came
	// of it.
	ObservationDecision ObservationKind = "decision"
	// ObservationAnswer is the judgement of a final answer against the
	// task's output schema: IsError when it does not match.
	ObservationAnswer ObservationKind = "answer"
	// ObservationFold records, as the first observation of a step, that
	// the steps before it were folded into a summary (Output) to keep the
	// context within the model's window; Arguments says which.
	ObservationFold ObservationKind = "fold"
)

// Observation is one thing the model is told after its turn.
type Observation struct {
	Kind      ObservationKind `json:"kind"`
	CallID    string          `json:"call_id,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Output    string          `json:"output"`
	IsError   bool            `json:"is_error,omitempty"`
	Refusal   string          `json:"refusal,omitempty"`
	// Changed lists the workspace files the call wrote.
	Changed []string `json:"changed,omitempty"`
}

// Step is one committed step: the model's turn, what came of it, and what
// it cost.
type Step struct {
	RunID      string           `json:"run_id"`
	Step       int              `json:"step"`
	StartedAt  time.Time        `json:"started_at"`
	FinishedAt time.Time        `json:"finished_at"`
	Provider   string           `json:"provider"`
	Assistant  provider.Message `json:"assistant"`
	// Observations are in the order the model sees them.
	Observations []Observation  `json:"observations"`
	Usage        provider.Usage `json:"usage"`
	Cost         provider.Cost  `json:"cost"`
	// Verified reports whether the verification gate passed after it.
	Verified bool `json:"verified"`
	// Attempts are the provider calls the step made, failures included.
	Attempts []Attempt `json:"attempts,omitempty"`
}

// Commit is what [Store.CommitStep] writes in one transaction.
type Commit struct {
	Step Step
	// Events are the step's events, its checkpoint marker among them.
	Events []Event
	// InDoubt lists the in-doubt intents the step reported to the model;
	// they become IntentReported.
	InDoubt []int64
	// Approvals are the approval requests the step deferred.
	Approvals []Approval
	// Applied lists decided approval requests whose outcome the step told
	// the model; they become ApprovalApplied.
	Applied []string
	// Remembered, when not nil, replaces the run's remembered rules.
	Remembered json.RawMessage
	// Finish, when the step ends the run, is its outcome, recorded in
	// the same transaction: no crash can leave the last step committed
	// and the run without its outcome.
	Finish *Finish
}

// Finish records a run's outcome. Status is StatusFinished or
// StatusPaused (then the pause starts At). Attempts are the provider calls
// of a step that did not commit, if any (an escalation's retries).
type Finish struct {
	RunID       string
	Status      Status
	Outcome     string
	OutcomeJSON json.RawMessage
	At          time.Time
	Attempts    []Attempt
	Events      []Event
}

// IntentState is where an intent stands.
type IntentState string

const (
	// IntentOpen is an effect that has started and whose step has not
	// committed.
	IntentOpen IntentState = "open"
	// IntentDone is an effect whose step committed.
	IntentDone IntentState = "done"
	// IntentInDoubt is an effect whose step never committed: the driver
	// died between starting it and recording its result, so it may or
	// may not have happened.
	IntentInDoubt IntentState = "in_doubt"
	// IntentReported is an in-doubt effect the model has been told about.
	IntentReported IntentState = "reported"
)

// Intent records that an effect which is not idempotent is about to
// happen. It is written, and committed, before the effect starts.
type Intent struct {
	ID        int64           `json:"id"`
	RunID     string          `json:"run_id"`
	Step      int             `json:"step"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	State     IntentState     `json:"state"`
	CreatedAt time.Time       `json:"created_at"`
}

// ApprovalState is where an approval request stands.
type ApprovalState string

const (
	// ApprovalPending waits for a decision.
	ApprovalPending ApprovalState = "pending"
	// ApprovalApproved was approved; the action has not yet been
	// performed.
	ApprovalApproved ApprovalState = "approved"
	// ApprovalDenied was denied by a person.
	ApprovalDenied ApprovalState = "denied"
	// ApprovalRefused was approved, but the policy in force at the
	// decision refused the action.
	ApprovalRefused ApprovalState = "refused"
	// ApprovalPerformed was decided and carried out (or found in doubt,
	// or refused); Result says what came of it, which the next step tells
	// the model.
	ApprovalPerformed ApprovalState = "performed"
	// ApprovalApplied is decided, and the step that told the model the
	// outcome has committed.
	ApprovalApplied ApprovalState = "applied"
)

// Approval is a request for a person's decision, with the exact action
// they are shown.
type Approval struct {
	ID        string          `json:"id"`
	RunID     string          `json:"run_id"`
	Step      int             `json:"step"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Act       string          `json:"act"`
	Target    string          `json:"target"`
	Content   string          `json:"content"`
	Shown     string          `json:"shown"`
	Hash      string          `json:"hash"`
	Rule      string          `json:"rule,omitempty"`
	Layer     string          `json:"layer,omitempty"`
	State     ApprovalState   `json:"state"`
	// Decision is the decision's JSON, once there is one.
	Decision json.RawMessage `json:"decision,omitempty"`
	// Result is what carrying out the decision came to, as the model is
	// told it, once it is ApprovalPerformed.
	Result    *Observation `json:"result,omitempty"`
	CreatedAt time.Time    `json:"created_at"`
	DecidedAt time.Time    `json:"decided_at,omitzero"`
}

// Performed is a decided approval carried out, and what the model will be
// told of it. Recording it closes the intent of its call.
type Performed struct {
	ID     string
	CallID string
	Result Observation
}

// Owner names a driver: a process on a host.
type Owner struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Started is when the process started, which tells it from a later
	// process that reuses its pid.
	Started time.Time `json:"started"`
	// Live is where the driver serves the run's events as they happen,
	// to watchers in other processes on its host (package watch): a
	// loopback URL that carries its own access token. Empty when it
	// serves none. A store keeps it with the lease and hands it to any
	// reader, who may then watch the run: it grants nothing the store's
	// own events do not.
	Live string `json:"live,omitempty"`
}

// Lease is the right to drive one run.
type Lease struct {
	RunID string `json:"run_id"`
	Owner Owner  `json:"owner"`
	// Generation grows with every new driver; a write made with an older
	// one is fenced out.
	Generation int64     `json:"generation"`
	Expires    time.Time `json:"expires"`
	// TTL is how long each renewal extends the lease.
	TTL time.Duration `json:"ttl"`
	// Agent, when set, is the run of the leased tree a write with this
	// handle is for: every agent of a tree writes under its root's one
	// lease (see For). Empty means RunID itself.
	Agent string `json:"agent,omitempty"`
}

// For returns a handle on l for agent, a run of l's tree: writes with it
// are fenced by l, and are refused unless agent's root is l's run.
func (l *Lease) For(agent string) *Lease {
	c := *l
	if agent == l.RunID {
		agent = ""
	}
	c.Agent = agent
	return &c
}

// Target is the run a write with l is for.
func (l *Lease) Target() string {
	if l.Agent != "" {
		return l.Agent
	}
	return l.RunID
}
