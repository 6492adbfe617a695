package abi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/fleet"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/traceview"
	"github.com/initorigin/io-harness-go/pkg/harness/watch"
)

// handler is a method of the table.
type handler func(a *ABI, ctx context.Context, params json.RawMessage) (any, error)

// methods is the method table. It never changes.
var methods = map[string]handler{
	"version":                  (*ABI).version,
	"harness.open":             (*ABI).harnessOpen,
	"harness.close":            (*ABI).harnessClose,
	"run.start":                (*ABI).runStart,
	"run.cancel":               (*ABI).runCancel,
	"run.status":               (*ABI).runStatus,
	"run.resume":               (*ABI).runResume,
	"run.resume_with_decision": (*ABI).runResumeWithDecision,
	"run.submit":               (*ABI).runSubmit,
	"run.fetch":                (*ABI).runFetch,
	"approval.resolve":         (*ABI).approvalResolve,
	"tool.resolve":             (*ABI).toolResolve,
	"approval.decide":          (*ABI).approvalDecide,
	"run.watch":                (*ABI).runWatch,
	"trace.get":                (*ABI).traceGet,
	"runs.list":                (*ABI).runsList,
	"policy.explain":           (*ABI).policyExplain,
	"store.check":              (*ABI).storeCheck,
	"sandbox.exec":             (*ABI).sandboxExec,
	"sandbox.backends":         (*ABI).sandboxBackends,
	"debug.stats":              (*ABI).debugStats,
	"debug.emit":               (*ABI).debugEmit,
	"models.list":              (*ABI).modelsList,
}

// Methods returns the method names, sorted. (A list of its own, because
// the version method that reports it is in the table; a test keeps the
// two equal.)
func Methods() []string {
	return []string{
		"approval.decide", "approval.resolve", "debug.emit", "debug.stats", "harness.close", "harness.open", "models.list", "policy.explain",
		"run.cancel", "run.fetch", "run.resume", "run.resume_with_decision", "run.start", "run.status", "run.submit", "run.watch", "runs.list",
		"sandbox.backends", "sandbox.exec", "store.check", "tool.resolve", "trace.get", "version",
	}
}

// EventKinds returns every event kind a host can receive: the harness's
// and the ABI's own.
func EventKinds() []string {
	return []string{
		string(harness.EventRunStarted), string(harness.EventRunResumed), string(harness.EventStepStarted),
		string(harness.EventModelDelta), string(harness.EventModelDone), string(harness.EventRetry),
		string(harness.EventFallback), string(harness.EventToolCall), string(harness.EventToolResult),
		string(harness.EventRefusal), string(harness.EventInDoubt), string(harness.EventVerification),
		string(harness.EventPolicy), string(harness.EventApprovalRequested), string(harness.EventApprovalResolved),
		string(harness.EventSandbox), string(harness.EventMCP), string(harness.EventContextFold),
		string(harness.EventAgentSpawned), string(harness.EventAgentRefused), string(harness.EventAgentFinished), string(harness.EventLedger),
		string(harness.EventImage), string(harness.EventBundle), string(harness.EventCheckpoint), string(harness.EventOutcome),
		KindApprovalPending, KindHostToolCall, KindDone, KindClosed, KindDebug, KindDebugDone,
	}
}

// VersionInfo is the result of version.
type VersionInfo struct {
	Version string `json:"version"`
	ABI     struct {
		Major int `json:"major"`
		Minor int `json:"minor"`
	} `json:"abi"`
	ContractVersion int      `json:"contract_version"`
	StoreSchema     int      `json:"store_schema"`
	PolicyVersion   int      `json:"policy_version"`
	Go              string   `json:"go"`
	OS              string   `json:"os"`
	Arch            string   `json:"arch"`
	Methods         []string `json:"methods"`
	EventKinds      []string `json:"event_kinds"`
	ErrorCodes      []Code   `json:"error_codes"`
}

func (a *ABI) version(context.Context, json.RawMessage) (any, error) {
	v := VersionInfo{Version: Version, ContractVersion: harness.ContractVersion, StoreSchema: sqlite.SchemaVersion,
		PolicyVersion: policy.Version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Methods: Methods(), EventKinds: EventKinds(), ErrorCodes: Codes()}
	v.ABI.Major, v.ABI.Minor = ABIMajor, ABIMinor
	return &v, nil
}

// harnessRef names a harness in params.
type harnessRef struct {
	Harness uint64 `json:"harness"`
}

func (a *ABI) openOf(id uint64) (*harnessEntry, error) {
	if id == 0 {
		return nil, fmt.Errorf("%w: params.harness: required", errInvalid)
	}
	h := a.harness(id)
	if h == nil {
		if a.wasClosed(id) {
			return nil, fmt.Errorf("%w: harness %d", errClosed, id)
		}
		return nil, fmt.Errorf("%w: no harness %d", errNotFound, id)
	}
	if h.closing.Load() {
		return nil, fmt.Errorf("%w: harness %d", errClosed, id)
	}
	return h, nil
}

func (a *ABI) harnessOpen(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Store          string `json:"store"`
		QueueSize      int    `json:"queue_size"`
		UseEnvironment bool   `json:"use_environment"`
		ReadOnly       bool   `json:"read_only"`
		Live           bool   `json:"live"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	switch {
	case p.Store == "":
		return nil, fmt.Errorf("%w: params.store: required: a file path, \":memory:\" or a postgres:// URL", errInvalid)
	case p.QueueSize < 0 || p.QueueSize > maxQueue:
		return nil, fmt.Errorf("%w: params.queue_size: want 1 to %d", errInvalid, maxQueue)
	case strings.ContainsRune(p.Store, 0):
		return nil, fmt.Errorf("%w: params.store: contains a NUL byte", errInvalid)
	}
	if p.QueueSize == 0 {
		p.QueueSize = defaultQueue
	}
	var st store.Store
	var err error
	if p.ReadOnly && p.Store != ":memory:" {
		st, err = harness.OpenStoreReadOnly(ctx, p.Store)
	} else {
		st, err = harness.OpenStore(ctx, p.Store)
	}
	if err != nil {
		// The store's error holds no credential; the name given may.
		return nil, &Error{Code: ErrorOf(err).Code, Message: "open the store: " + err.Error(), Details: map[string]any{"store": harness.StoreName(p.Store)}}
	}
	var lookup func(string) (string, bool)
	if p.UseEnvironment {
		lookup = a.opts.LookupEnv
	}
	var hub *watch.Hub
	if p.Live {
		if hub, err = watch.Listen(nil); err != nil {
			st.Close()
			return nil, &Error{Code: CodeUnavailable, Message: errNoHub.Error() + ": " + err.Error()}
		}
	}
	h := a.openHarness(st, p.QueueSize, lookup)
	h.hub = hub
	out := map[string]any{"harness": h.id}
	if hub != nil {
		out["live"] = true
	}
	return out, nil
}

func (a *ABI) harnessClose(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Harness   uint64 `json:"harness"`
		TimeoutMS *int64 `json:"timeout_ms"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	timeout := 5 * time.Second
	if p.TimeoutMS != nil {
		timeout = time.Duration(*p.TimeoutMS) * time.Millisecond
	}
	switch a.Close(p.Harness, timeout) {
	case StatusUnknownHandle:
		return nil, fmt.Errorf("%w: no harness %d", errNotFound, p.Harness)
	case StatusIllegalContext:
		return nil, fmt.Errorf("%w: a harness cannot be closed from inside its own event callback", errConflict)
	case StatusTimeout:
		return nil, &Error{Code: CodeDeadlineExceeded, Retryable: true,
			Message: fmt.Sprintf("harness %d is closed but its runs did not end within %s; close again to wait", p.Harness, timeout)}
	}
	return map[string]any{"closed": true}, nil
}

// runParams are the params shared by run.start and the resumes.
type runParams struct {
	Harness   uint64          `json:"harness"`
	Spec      json.RawMessage `json:"spec"`
	Approvals string          `json:"approvals"`
	RunID     string          `json:"run_id"`
	RequestID string          `json:"request_id"`
	Decision  json.RawMessage `json:"decision"`
	Budgets   json.RawMessage `json:"budgets"`
	// Containment raises a tree's stored caps on a resume.
	Containment json.RawMessage `json:"containment"`
	Reopen      bool            `json:"reopen"`
	Force       bool            `json:"force"`
	// Tools are the host tools of the run (HostToolSpec).
	Tools json.RawMessage `json:"tools"`
}

// started is the result of run.start and the resumes.
type started struct {
	Run   uint64 `json:"run"`
	RunID string `json:"run_id"`
}

func (a *ABI) runStart(ctx context.Context, raw json.RawMessage) (any, error) {
	var p runParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, err
	}
	if len(p.Spec) == 0 {
		return nil, fmt.Errorf("%w: params.spec: required", errInvalid)
	}
	tools, err := parseHostTools(p.Tools)
	if err != nil {
		return nil, err
	}
	spec, err := harness.ParseSpec(p.Spec)
	if err != nil {
		return nil, specError(err)
	}
	opts, err := spec.Options(h.lookup)
	if err != nil {
		return nil, specError(err)
	}
	if err := h.addTelemetry(&opts, spec.Telemetry); err != nil {
		return nil, err
	}
	task := spec.Task
	r, err := h.startRun(ctx, "", opts, p.Approvals, tools, func(ctx context.Context, o harness.Options) (*harness.Result, error) {
		return harness.Run(ctx, task, o)
	})
	if err != nil {
		return nil, err
	}
	return &started{Run: r.id, RunID: r.RunID()}, nil
}

// specError prefixes the field of a spec error with "spec.".
func specError(err error) error {
	var he *harness.Error
	if errors.As(err, &he) && he.Field != "" && !strings.HasPrefix(he.Field, "spec.") {
		c := *he
		c.Field = "spec." + he.Field
		return &c
	}
	return err
}

// resumeSpec reads the spec of a resume: its providers, policy and
// sandbox. The task is optional and ignored, since a resumed run keeps
// the task it was stored with.
func resumeSpec(raw json.RawMessage) (*harness.Spec, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: params.spec: required (its providers drive the resumed run)", errInvalid)
	}
	s, err := harness.ParseResumeSpec(raw)
	if err != nil {
		return nil, specError(err)
	}
	return &s, nil
}

func (a *ABI) resumeOptions(p *runParams) (*harnessEntry, harness.Options, harness.ResumeOptions, *hostTools, error) {
	var ro harness.ResumeOptions
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, harness.Options{}, ro, nil, err
	}
	tools, err := parseHostTools(p.Tools)
	if err != nil {
		return nil, harness.Options{}, ro, nil, err
	}
	if p.RunID == "" {
		return nil, harness.Options{}, ro, nil, fmt.Errorf("%w: params.run_id: required", errInvalid)
	}
	spec, err := resumeSpec(p.Spec)
	if err != nil {
		return nil, harness.Options{}, ro, nil, err
	}
	opts, err := spec.Options(h.lookup)
	if err != nil {
		return nil, harness.Options{}, ro, nil, specError(err)
	}
	if err := h.addTelemetry(&opts, spec.Telemetry); err != nil {
		return nil, harness.Options{}, ro, nil, err
	}
	if len(p.Budgets) > 0 && string(p.Budgets) != "null" {
		var b harness.Budgets
		dec := json.NewDecoder(bytes.NewReader(p.Budgets))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			return nil, harness.Options{}, ro, nil, fmt.Errorf("%w: params.budgets: %v", errInvalid, err)
		}
		ro.Budgets = &b
	}
	if len(p.Containment) > 0 && string(p.Containment) != "null" {
		var c harness.Containment
		dec := json.NewDecoder(bytes.NewReader(p.Containment))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, harness.Options{}, ro, nil, fmt.Errorf("%w: params.containment: %v", errInvalid, err)
		}
		ro.Containment = &c
	}
	ro.Reopen, ro.Force = p.Reopen, p.Force
	return h, opts, ro, tools, nil
}

func (a *ABI) runResume(ctx context.Context, raw json.RawMessage) (any, error) {
	var p runParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, opts, ro, tools, err := a.resumeOptions(&p)
	if err != nil {
		return nil, err
	}
	runID := p.RunID
	r, err := h.startRun(ctx, runID, opts, p.Approvals, tools, func(ctx context.Context, o harness.Options) (*harness.Result, error) {
		return harness.Resume(ctx, runID, o, ro)
	})
	if err != nil {
		return nil, err
	}
	return &started{Run: r.id, RunID: runID}, nil
}

func decodeDecision(raw json.RawMessage) (approve.Decision, error) {
	var d approve.Decision
	if len(raw) == 0 || string(raw) == "null" {
		return d, fmt.Errorf("%w: params.decision: required, such as {\"kind\":\"approve\"}", errInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("%w: params.decision: %v", errInvalid, err)
	}
	if err := d.Validate(); err != nil {
		return d, fmt.Errorf("%w: params.decision: %v", errInvalid, err)
	}
	return d, nil
}

func (a *ABI) runResumeWithDecision(ctx context.Context, raw json.RawMessage) (any, error) {
	var p runParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.RequestID == "" {
		return nil, fmt.Errorf("%w: params.request_id: required", errInvalid)
	}
	d, err := decodeDecision(p.Decision)
	if err != nil {
		return nil, err
	}
	h, opts, ro, tools, err := a.resumeOptions(&p)
	if err != nil {
		return nil, err
	}
	runID, reqID := p.RunID, p.RequestID
	r, err := h.startRun(ctx, runID, opts, p.Approvals, tools, func(ctx context.Context, o harness.Options) (*harness.Result, error) {
		return harness.ResumeWithDecision(ctx, runID, reqID, d, o, ro)
	})
	if err != nil {
		return nil, err
	}
	return &started{Run: r.id, RunID: runID}, nil
}

func (a *ABI) runCancel(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Run     uint64 `json:"run"`
		Harness uint64 `json:"harness"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	id := p.Run
	if id == 0 {
		id = p.Harness
	}
	if id == 0 {
		return nil, fmt.Errorf("%w: params.run or params.harness: required", errInvalid)
	}
	switch a.Cancel(id) {
	case StatusUnknownHandle:
		return nil, fmt.Errorf("%w: no run or harness %d", errNotFound, id)
	case StatusClosed:
		return nil, fmt.Errorf("%w: harness %d", errClosed, id)
	}
	return map[string]any{"cancelled": true}, nil
}

func (a *ABI) runStatus(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Run uint64 `json:"run"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	r := a.run(p.Run)
	if r == nil {
		return nil, fmt.Errorf("%w: no run %d", errNotFound, p.Run)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]any{"run": r.id, "run_id": r.runID, "state": "running"}
	if r.done != nil {
		out["state"] = "done"
		out["done"] = r.done
	}
	return out, nil
}

// decisionParams are the params of a method that answers an approval
// request: approval.resolve and approval.decide.
type decisionParams struct {
	Harness   uint64          `json:"harness"`
	RunID     string          `json:"run_id"`
	RequestID string          `json:"request_id"`
	Decision  json.RawMessage `json:"decision"`
	// By names who decided; the queue log of a fleet's run records it.
	By string `json:"by"`
}

// decisionOf reads the params of a method that answers an approval
// request: the open harness, the params and the decision.
func (a *ABI) decisionOf(raw json.RawMessage) (*harnessEntry, *decisionParams, approve.Decision, error) {
	var p decisionParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, nil, approve.Decision{}, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, nil, approve.Decision{}, err
	}
	switch {
	case p.RunID == "":
		return nil, nil, approve.Decision{}, fmt.Errorf("%w: params.run_id: required", errInvalid)
	case p.RequestID == "":
		return nil, nil, approve.Decision{}, fmt.Errorf("%w: params.request_id: required", errInvalid)
	}
	d, err := decodeDecision(p.Decision)
	if err != nil {
		return nil, nil, approve.Decision{}, err
	}
	return h, &p, d, nil
}

func (a *ABI) approvalResolve(_ context.Context, raw json.RawMessage) (any, error) {
	h, p, d, err := a.decisionOf(raw)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	r := h.byRunID[p.RunID]
	h.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("%w: run %s is not live in harness %d; answer a deferred request with run.resume_with_decision",
			errNotFound, p.RunID, p.Harness)
	}
	state, err := r.resolve(p.RequestID, d)
	if err != nil {
		return nil, err
	}
	return map[string]any{"state": state}, nil
}

func (a *ABI) toolResolve(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Harness   uint64  `json:"harness"`
		RunID     string  `json:"run_id"`
		RequestID string  `json:"request_id"`
		Output    *string `json:"output"`
		Error     *string `json:"error"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, err
	}
	switch {
	case p.RunID == "":
		return nil, fmt.Errorf("%w: params.run_id: required", errInvalid)
	case p.RequestID == "":
		return nil, fmt.Errorf("%w: params.request_id: required", errInvalid)
	case p.Output == nil && (p.Error == nil || *p.Error == ""):
		return nil, fmt.Errorf("%w: params.output (the tool's result) or params.error (why it failed): one is required", errInvalid)
	}
	var ans toolAnswer
	if p.Output != nil {
		ans.Output = *p.Output
	}
	if p.Error != nil {
		ans.Err = *p.Error
	}
	h.mu.Lock()
	r := h.byRunID[p.RunID]
	h.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("%w: run %s is not live in harness %d", errNotFound, p.RunID, p.Harness)
	}
	state, err := r.resolveTool(p.RequestID, ans)
	if err != nil {
		return nil, err
	}
	return map[string]any{"state": state}, nil
}

func (a *ABI) traceGet(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Harness uint64 `json:"harness"`
		RunID   string `json:"run_id"`
		Format  string `json:"format"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, err
	}
	if p.RunID == "" {
		return nil, fmt.Errorf("%w: params.run_id: required", errInvalid)
	}
	if p.Format != "" && p.Format != "json" && p.Format != "text" && p.Format != "html" {
		return nil, fmt.Errorf("%w: params.format: want json, text or html, got %q", errInvalid, p.Format)
	}
	if p.Format == "html" {
		// The run and every run below it, as one self-contained page.
		v, err := traceview.Load(ctx, h.st, p.RunID)
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		if err := traceview.WriteHTML(&b, v); err != nil {
			return nil, err
		}
		return map[string]any{"format": "html", "html": b.String(), "agents": len(v.Agents)}, nil
	}
	t, err := harness.ReadTrace(ctx, h.st, p.RunID)
	if err != nil {
		return nil, err
	}
	// A fleet's run has a queue log beside its events: every action of
	// the job queue on it.
	var queue []postgres.QueueEntry
	if st, err := fleet.Of(h.st); err == nil {
		if queue, err = st.QueueLog(ctx, p.RunID); err != nil {
			return nil, err
		}
	}
	if p.Format == "text" {
		var b strings.Builder
		if err := t.WriteText(&b); err != nil {
			return nil, err
		}
		writeQueue(&b, queue)
		return map[string]any{"format": "text", "text": b.String()}, nil
	}
	out := map[string]any{"format": "json", "trace": t}
	if queue != nil {
		out["queue"] = queue
	}
	return out, nil
}

func (a *ABI) runsList(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Harness  uint64 `json:"harness"`
		Limit    int    `json:"limit"`
		ParentID string `json:"parent_id"`
		RootID   string `json:"root_id"`
		Roots    bool   `json:"roots"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, err
	}
	if p.Limit < 0 {
		return nil, fmt.Errorf("%w: params.limit: must not be negative", errInvalid)
	}
	if p.RootID != "" && p.Limit == 0 {
		p.Limit = -1 // a tree is listed whole
	}
	filter := store.RunFilter{ParentID: p.ParentID, RootID: p.RootID, Roots: p.Roots, Limit: p.Limit}
	if st, err := fleet.Of(h.st); err == nil {
		// A fleet's runs say where each stands: queued, running (with the
		// worker that holds it), paused, finished or stalled.
		runs, err := fleet.Runs(ctx, st, filter)
		if err != nil {
			return nil, err
		}
		if runs == nil {
			runs = []fleet.RunState{}
		}
		return map[string]any{"runs": runs, "fleet": true}, nil
	}
	runs, err := h.st.Runs(ctx, filter)
	if err != nil {
		return nil, err
	}
	if runs == nil {
		runs = []store.Run{}
	}
	return map[string]any{"runs": runs}, nil
}

func (a *ABI) policyExplain(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Policy json.RawMessage `json:"policy"`
		Act    string          `json:"act"`
		Target string          `json:"target"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	pol, err := parsePolicy(p.Policy)
	if err != nil {
		return nil, err
	}
	act := policy.Act(p.Act)
	if !slices.Contains(policy.Acts(), act) {
		return nil, fmt.Errorf("%w: params.act: want read, write, exec or net, got %q", errInvalid, p.Act)
	}
	if p.Target == "" {
		return nil, fmt.Errorf("%w: params.target: required", errInvalid)
	}
	if act == policy.Exec {
		// A command line is judged as a run judges its argv, with the
		// host's PATH telling which spellings are the system's programs.
		if argv, ok := policy.SplitWords(p.Target); ok && len(argv) > 0 {
			return pol.ExplainArgv(argv, tool.NewPrograms(os.Getenv("PATH"), os.TempDir()).Resolve), nil
		}
	}
	return pol.Explain(act, p.Target), nil
}

// parsePolicy reads a policy param: a policy object, or the name of a
// built-in policy ("default" or "permissive").
func parsePolicy(raw json.RawMessage) (policy.Policy, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return policy.Policy{}, fmt.Errorf("%w: params.policy: required: a policy object, \"default\" or \"permissive\"", errInvalid)
	}
	if raw[0] == '"' {
		name, err := strconv.Unquote(string(raw))
		if err != nil {
			return policy.Policy{}, fmt.Errorf("%w: params.policy: %v", errInvalid, err)
		}
		pol, err := policy.Named(name)
		if err != nil {
			return policy.Policy{}, fmt.Errorf("%w: params.policy: %v", errInvalid, err)
		}
		return pol, nil
	}
	return policy.Parse(raw)
}

func (a *ABI) debugStats(context.Context, json.RawMessage) (any, error) {
	s := a.Stats()
	return &s, nil
}

func (a *ABI) debugEmit(_ context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Harness uint64 `json:"harness"`
		Count   int    `json:"count"`
		Size    int    `json:"size"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, err
	}
	if p.Count < 0 || p.Count > 10_000_000 || p.Size < 0 || p.Size > 1<<20 {
		return nil, fmt.Errorf("%w: params.count must be 0 to 10000000 and params.size 0 to 1048576", errInvalid)
	}
	pad := strings.Repeat("x", p.Size)
	h.wg.Add(1)
	a.goStart(func() {
		defer h.wg.Done()
		for i := 1; i <= p.Count; i++ {
			ev := []byte(`{"kind":"debug","n":` + strconv.Itoa(i) + `,"pad":"` + pad + `"}`)
			if !h.push(ev) {
				return
			}
		}
		h.push([]byte(`{"kind":"debug_done","count":` + strconv.Itoa(p.Count) + `}`))
	})
	return map[string]any{"queued": p.Count}, nil
}

// storeCheck runs a store file's integrity check and summarises it,
// reading only.
func (a *ABI) storeCheck(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Store string `json:"store"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Store == "" || p.Store == ":memory:" || strings.ContainsRune(p.Store, 0) {
		return nil, fmt.Errorf("%w: params.store: a store file's path", errInvalid)
	}
	if postgres.IsDSN(p.Store) {
		return nil, fmt.Errorf("%w: params.store: store.check reads SQLite files; %s is a PostgreSQL database, which the server checks itself (pg_amcheck)",
			errInvalid, harness.StoreName(p.Store))
	}
	st, err := sqlite.OpenReadOnly(ctx, p.Store)
	if err != nil {
		return nil, &Error{Code: ErrorOf(err).Code, Message: "open the store: " + err.Error(), Details: map[string]any{"store": p.Store}}
	}
	defer st.Close()
	rep, err := st.Check(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"report": rep, "ok": rep.OK(), "text": rep.String()}, nil
}
