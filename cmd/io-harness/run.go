package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/initorigin/io-harness-go/internal/abi"
	"github.com/initorigin/io-harness-go/internal/visible"
	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// defaultStore is the store of every command that takes --store.
const defaultStore = "io-harness.db"

// storeHelp describes --store.
const storeHelp = "the store that records the runs: a SQLite file, or a postgres:// URL (a fleet's database)"

// runFlags are the flags shared by run, resume and approve.
type runFlags struct {
	store     string
	json      bool
	approvals string
	// specPath is the spec file the command read ("-": stdin), for the
	// commands it prints.
	specPath string
}

func (e *env) addRunFlags(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}, f *runFlags) {
	fs.StringVar(&f.store, "store", defaultStore, storeHelp)
	fs.BoolVar(&f.json, "json", false, "print every event as one JSON line instead of progress")
	fs.StringVar(&f.approvals, "approvals", "", "how approvals are answered: ask (on the terminal), approve, deny, defer, or wait\n"+
		"(defer, then wait for a decision from another process: io-harness watch);\n"+
		"default: ask when stdin is a terminal and --json is off, else defer")
}

const runUsage = `Usage: io-harness run [--store PATH] [--json] [--approvals MODE] SPEC.json

Runs the run spec in SPEC.json (docs/spec.md; - reads it from stdin, and
approvals are then not asked there) and shows its progress: the
step, the tokens and cost so far, the tool at work, and the outcome. With
--json every event is printed as one JSON line (docs/abi.md, "Events").
Ctrl-C cancels the run (a second Ctrl-C quits at once). A run that ends
awaiting_approval is answered later with io-harness approve.`

func (e *env) runCmd(args []string) int {
	var f runFlags
	fs := e.flags("run", runUsage)
	e.addRunFlags(fs, &f)
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return e.runUsageError(&f, fs, "", "want exactly one SPEC.json, got %d arguments", len(pos))
	}
	spec, err := e.readSpec(pos[0])
	if err != nil {
		return e.failRun(&f, "", "read the spec", err)
	}
	f.specPath = pos[0]
	return e.drive(&f, "run.start", map[string]any{"spec": spec})
}

const resumeUsage = `Usage: io-harness resume [--store PATH] [--json] [--reopen] [--force] [budget flags] SPEC.json RUN_ID

Continues a stored run from its last committed step. SPEC.json gives the
providers (and optionally the policy and sandbox); the task is the one the
run was stored with. A run that ended on a budget continues when a budget
flag raises it (each budget flag replaces that budget; the others stay); an
escalated or cancelled run runs again with --reopen.

One process drives a run at a time. A run another live process drives is
refused (exit 7); --force takes it over, and nothing the other process
writes afterwards reaches the store. A run whose process died is taken over
without --force.`

func (e *env) resumeCmd(args []string) int {
	var f runFlags
	fs := e.flags("resume", resumeUsage)
	e.addRunFlags(fs, &f)
	b := addBudgetFlags(fs)
	reopen := fs.Bool("reopen", false, "drive an escalated or cancelled run again")
	force := fs.Bool("force", false, "take the run over from a process that still holds it")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		return e.runUsageError(&f, fs, "", "want SPEC.json and RUN_ID, got %d arguments", len(pos))
	}
	spec, err := e.readSpec(pos[0])
	if err != nil {
		return e.failRun(&f, pos[1], "read the spec", err)
	}
	f.specPath = pos[0]
	p := map[string]any{"spec": spec, "run_id": pos[1], "reopen": *reopen, "force": *force}
	// A tree keeps the caps it was started with; the spec's containment,
	// when it has one, raises them (to go on past a ceiling).
	var caps struct {
		Containment json.RawMessage `json:"containment"`
	}
	if json.Unmarshal(spec, &caps) == nil && len(caps.Containment) > 0 {
		p["containment"] = caps.Containment
	}
	if budgets, set, err := b.budgets(); err != nil {
		return e.runUsageError(&f, fs, pos[1], "%v", err)
	} else if set {
		p["budgets"] = budgets
	}
	return e.drive(&f, "run.resume", p)
}

const approveUsage = `Usage: io-harness approve --spec SPEC.json [--store PATH] [--json] RUN_ID REQUEST_ID (--allow | --deny REASON)
       io-harness approve --store postgres://... RUN_ID REQUEST_ID (--allow | --deny REASON)

Answers the approval request a stored run awaits (its outcome was
awaiting_approval; the request id is in the outcome and in the trace) and
continues the run, in this process. --spec gives the providers that drive
the rest of the run. The policy is checked again, and exactly the action
the person was shown is performed.

On a fleet's database without --spec, the decision is queued instead:
whichever worker claims it carries it out, with the same checks, and
continues the run. Exactly one decision per request is taken.`

func (e *env) approveCmd(args []string) int {
	var f runFlags
	fs := e.flags("approve", approveUsage)
	e.addRunFlags(fs, &f)
	specPath := fs.String("spec", "", "the run spec whose providers continue the run (required)")
	allow := fs.Bool("allow", false, "approve the action")
	deny := fs.String("deny", "", "deny the action; the reason is told to the model")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) != 2:
		return e.runUsageError(&f, fs, "", "want RUN_ID and REQUEST_ID, got %d arguments", len(pos))
	case *allow == (*deny != ""):
		return e.runUsageError(&f, fs, pos[0], "give exactly one of --allow and --deny REASON")
	}
	decision := map[string]any{"kind": "approve"}
	if *deny != "" {
		decision = map[string]any{"kind": "deny", "reason": *deny}
	}
	if *specPath == "" && postgres.IsDSN(f.store) {
		// A fleet's run: the decision is queued, and a worker carries it
		// out.
		return e.decideFleet(f.store, pos[0], pos[1], decision, f.json)
	}
	if *specPath == "" {
		return e.runUsageError(&f, fs, pos[0], "--spec is required: its providers drive the rest of the run")
	}
	spec, err := e.readSpec(*specPath)
	if err != nil {
		return e.failRun(&f, pos[0], "read the spec", err)
	}
	f.specPath = *specPath
	return e.drive(&f, "run.resume_with_decision", map[string]any{"spec": spec, "run_id": pos[0], "request_id": pos[1], "decision": decision})
}

// budgetFlags are resume's budget flags.
type budgetFlags struct {
	steps, tokens *int64
	time          *string
	cost          *float64
}

func addBudgetFlags(fs interface {
	Int64(string, int64, string) *int64
	String(string, string, string) *string
	Float64(string, float64, string) *float64
}) *budgetFlags {
	return &budgetFlags{
		steps:  fs.Int64("max-steps", 0, "the new step budget"),
		time:   fs.String("time", "", "the new time budget, such as 10m (counted from the run's start)"),
		tokens: fs.Int64("max-tokens", 0, "the new token budget"),
		cost:   fs.Float64("max-cost", 0, "the new money budget, in US dollars"),
	}
}

func (b *budgetFlags) budgets() (map[string]any, bool, error) {
	out := map[string]any{}
	if *b.steps > 0 {
		out["max_steps"] = *b.steps
	}
	if *b.time != "" {
		if _, err := time.ParseDuration(*b.time); err != nil {
			return nil, false, fmt.Errorf("--time: %v", err)
		}
		out["time"] = *b.time
	}
	if *b.tokens > 0 {
		out["max_tokens"] = *b.tokens
	}
	if *b.cost > 0 {
		out["max_cost_usd"] = *b.cost
	}
	return out, len(out) > 0, nil
}

// readSpec reads a spec as raw JSON (the table validates it): from a
// file, or from stdin when path is "-". A spec that is not JSON is named
// with what is wrong and where.
func (e *env) readSpec(path string) (json.RawMessage, error) {
	var data []byte
	var err error
	name := path
	if path == "-" {
		name = "the spec on stdin"
		data, err = io.ReadAll(io.LimitReader(e.stdin, abi.MaxRequestBytes+1))
		if err == nil && len(data) > abi.MaxRequestBytes {
			err = fmt.Errorf("%s is larger than %d bytes", name, abi.MaxRequestBytes)
		}
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if d := abi.Depth(data); d > abi.MaxDepth {
		return nil, fmt.Errorf("%s nests objects and arrays %d deep; at most %d are allowed", name, d, abi.MaxDepth)
	}
	var v json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return nil, fmt.Errorf("%s is not valid JSON: line %d: %v", name, line, err)
		}
		return nil, fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	if len(v) == 0 || v[0] != '{' {
		return nil, fmt.Errorf("%s is not a JSON object", name)
	}
	return data, nil
}

// event is the part of an event the CLI reads.
type event struct {
	Kind      string           `json:"kind"`
	Run       uint64           `json:"run"`
	RunID     string           `json:"run_id"`
	Step      int              `json:"step"`
	Text      string           `json:"text"`
	Provider  string           `json:"provider"`
	Tool      string           `json:"tool"`
	Target    string           `json:"target"`
	Arguments json.RawMessage  `json:"arguments"`
	Output    string           `json:"output"`
	IsError   bool             `json:"is_error"`
	Reason    string           `json:"reason"`
	WaitMS    int64            `json:"wait_ms"`
	Usage     *usage           `json:"usage"`
	Cost      *cost            `json:"cost"`
	Passed    *bool            `json:"passed"`
	Checks    []check          `json:"checks"`
	Decision  string           `json:"decision"`
	RequestID string           `json:"request_id"`
	Request   *request         `json:"request"`
	Status    string           `json:"status"`
	Outcome   *harness.Outcome `json:"outcome"`
	Error     *abi.Error       `json:"error"`
	// Path is the agent's path in a tree of agents; "root" for the run.
	Path  string              `json:"path"`
	Agent *harness.AgentEvent `json:"agent"`
}

type usage struct {
	In  int64 `json:"input_tokens"`
	Out int64 `json:"output_tokens"`
}

type cost struct {
	USD   float64 `json:"usd"`
	Known bool    `json:"known"`
}

type check struct {
	Kind   string `json:"kind"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

type request struct {
	Tool   string `json:"tool"`
	Act    string `json:"act"`
	Target string `json:"target"`
	Shown  string `json:"shown"`
	Rule   string `json:"rule"`
	Layer  string `json:"layer"`
}

// drive opens the store, starts (or resumes) one run, follows its events
// to the done event, and returns the exit code of its outcome.
func (e *env) drive(f *runFlags, method string, params map[string]any) int {
	runID, _ := params["run_id"].(string) // a resume's; a new run has none yet
	mode := f.approvals
	if mode == "" {
		mode = "defer"
		if e.stdinTTY && !f.json {
			mode = "ask"
		}
	}
	switch mode {
	case "ask", "approve", "deny", "defer", "wait":
	default:
		fmt.Fprintf(e.stderr, "io-harness: --approvals: want ask, approve, deny, defer or wait, got %q\n", mode)
		e.doneOnError(f, runID, &abi.Error{Code: abi.CodeInvalidArgument, Message: fmt.Sprintf("--approvals: want ask, approve, deny, defer or wait, got %q", mode)})
		return exitUsage
	}
	if mode == "ask" && f.specPath == "-" {
		if f.approvals == "ask" {
			fmt.Fprintln(e.stderr, "io-harness: --approvals ask: the spec was read from stdin, so there is nobody to ask there; use approve, deny or defer")
			e.doneOnError(f, runID, &abi.Error{Code: abi.CodeInvalidArgument, Message: "--approvals ask: the spec was read from stdin"})
			return exitUsage
		}
		mode = "defer"
	}
	if mode != "ask" {
		params["approvals"] = mode
	}
	var opened struct {
		Harness uint64 `json:"harness"`
	}
	// live: a watcher in another process (io-harness watch) sees each step
	// as it happens.
	if err := e.call("harness.open", map[string]any{"store": f.store, "use_environment": true, "live": true}, &opened); err != nil {
		return e.failRun(f, runID, "open the store "+harness.StoreName(f.store), err)
	}
	h := opened.Harness
	defer e.a.Close(h, 10*time.Second)
	params["harness"] = h
	var started struct {
		Run   uint64 `json:"run"`
		RunID string `json:"run_id"`
	}
	if err := e.call(method, params, &started); err != nil {
		return e.failRun(f, runID, strings.TrimPrefix(method, "run."), err)
	}

	// Ctrl-C cancels the run; a second one quits at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	interrupted := make(chan struct{})
	stopSignals := make(chan struct{})
	defer close(stopSignals)
	go func() {
		select {
		case <-sigs:
		case <-stopSignals:
			return
		}
		e.a.Cancel(started.Run)
		close(interrupted)
		select {
		case <-sigs:
			fmt.Fprintln(e.stderr, "\nio-harness: interrupted twice; quitting")
			os.Exit(exitCancelled)
		case <-stopSignals:
		}
	}()

	p := newProgress(e, f.json, started.RunID)
	answers := newAnswers(e.stdin)
	seen := 0 // events of the run before its done event
	code, err := e.eachEvent(h, started.Run, func(ev *event, raw json.RawMessage) (int, bool) {
		p.show(ev, raw)
		if mode == "wait" && !f.json && ev.Kind == string(harness.EventOutcome) && ev.Outcome != nil && ev.Outcome.Kind == harness.AwaitingApproval {
			p.line("waiting for a decision on request %s; answer it from another terminal with:\n  io-harness watch --store %s %s",
				ev.Outcome.RequestID, f.store, ev.RunID)
		}
		if ev.Kind == abi.KindApprovalPending && mode == "ask" {
			d := e.ask(ev, answers, interrupted)
			if err := e.call("approval.resolve", map[string]any{"harness": h, "run_id": ev.RunID,
				"request_id": ev.RequestID, "decision": d}, nil); err != nil {
				fmt.Fprintf(e.stderr, "io-harness: answer the approval: %v\n", err)
			}
		}
		if ev.Kind == abi.KindDone {
			p.finish()
			if method == "run.resume" && seen == 0 && !f.json {
				e.nothingResumed(f, ev, params)
			}
			return e.doneCode(f, ev), true
		}
		seen++
		return 0, false
	})
	if err != nil {
		p.finish()
		return e.failRun(f, started.RunID, "follow the run", err)
	}
	return code
}

// eachEvent polls the harness h for the events of run and hands each to
// fn in order, until fn says it is done; it returns fn's exit code, or an
// error when the events could not be read to the end.
func (e *env) eachEvent(h, run uint64, fn func(ev *event, raw json.RawMessage) (code int, done bool)) (int, error) {
	for {
		batch := e.a.Poll(h, 200*time.Millisecond, 256)
		if batch == nil {
			continue
		}
		var raws []json.RawMessage
		if err := json.Unmarshal(batch, &raws); err != nil {
			return 0, fmt.Errorf("read events: %w", err)
		}
		for _, raw := range raws {
			var ev event
			if err := json.Unmarshal(raw, &ev); err != nil {
				return 0, fmt.Errorf("read an event: %w", err)
			}
			if ev.Kind == abi.KindClosed {
				return 0, errors.New("the harness closed")
			}
			if ev.Run != run {
				continue
			}
			if code, done := fn(&ev, raw); done {
				return code, nil
			}
		}
	}
}

// failRun is fail for a command that drives a run (run, resume): with
// --json, stdout then ends with the done event of a run that could not
// be driven, as every --json invocation's does. runID is the run's, when
// known.
func (e *env) failRun(f *runFlags, runID, what string, err error) int {
	code := e.fail(what, err)
	var ae *abi.Error
	if !errors.As(err, &ae) {
		// The CLI's own: the spec could not be read, the events could not
		// be followed.
		ae = &abi.Error{Code: abi.CodeInvalidArgument, Message: what + ": " + err.Error()}
		if what == "follow the run" {
			ae.Code = abi.CodeInternal
		}
	}
	if code == exitConflict && runID != "" {
		fmt.Fprintf(e.stderr, "to take it over if that process is dead:\n  io-harness resume --force%s %s %s\n", storeFlag(f), shellQuote(specArg(f)), runID)
	}
	e.doneOnError(f, runID, ae)
	return code
}

// runUsageError is usageError for run and resume: with --json, stdout ends
// with a done event saying what is wrong.
func (e *env) runUsageError(f *runFlags, fs *flag.FlagSet, runID, format string, args ...any) int {
	e.doneOnError(f, runID, &abi.Error{Code: abi.CodeInvalidArgument, Message: fmt.Sprintf(format, args...)})
	return usageError(fs, format, args...)
}

// doneOnError prints, with --json, the done event (status error, or
// cancelled for a cancellation) of a run that could not be driven.
func (e *env) doneOnError(f *runFlags, runID string, ae *abi.Error) {
	if !f.json {
		return
	}
	d := abi.DoneEvent{Kind: abi.KindDone, RunID: runID, Status: abi.StatusError, Error: ae}
	if ae.Code == abi.CodeCancelled {
		d.Status = abi.StatusCancelled
	}
	data, _ := json.Marshal(d)
	fmt.Fprintln(e.stdout, string(data))
}

// nothingResumed says why a resume of a finished run did nothing: its
// outcome is final, and only --reopen drives it again.
func (e *env) nothingResumed(f *runFlags, ev *event, params map[string]any) {
	if ev.Outcome == nil {
		return
	}
	o := ev.Outcome
	fmt.Fprintf(e.stdout, "run %s had already ended %s after %d step(s); nothing was resumed.\n", ev.RunID, o.Kind, o.Steps)
	if o.Reason != "" {
		fmt.Fprintf(e.stdout, "  (%s)\n", visible.Text(o.Reason))
	}
	if o.Kind == harness.Cancelled || o.Kind == harness.Escalated {
		if reopen, _ := params["reopen"].(bool); !reopen {
			fmt.Fprintf(e.stdout, "to drive it again:\n  io-harness resume --reopen%s %s %s\n", storeFlag(f), shellQuote(specArg(f)), ev.RunID)
		}
	}
}

// storeFlag is " --store PATH" when the command used another store than
// the default, for the commands it prints.
func storeFlag(f *runFlags) string {
	if f.store == defaultStore {
		return ""
	}
	return " --store " + shellQuote(f.store)
}

// specArg is the spec file to print in a command, or a placeholder when
// the spec came on stdin.
func specArg(f *runFlags) string {
	if f.specPath == "" || f.specPath == "-" {
		return "SPEC.json"
	}
	return f.specPath
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r == '=' || r == ',' || r == '@' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// doneCode reports a run's end and returns its exit code.
func (e *env) doneCode(f *runFlags, ev *event) int {
	jsonMode := f.json
	if ev.Error != nil {
		if !jsonMode {
			fmt.Fprintf(e.stderr, "io-harness: run %s: %s: %s\n", ev.RunID, ev.Error.Code, ev.Error.Message)
		}
		switch ev.Error.Code {
		case abi.CodePermissionDenied:
			return exitBoundary
		case abi.CodeCancelled:
			return exitCancelled
		}
		return exitError
	}
	if ev.Outcome == nil {
		return exitError
	}
	if !jsonMode {
		switch ev.Outcome.Kind {
		case harness.AwaitingApproval:
			fmt.Fprintf(e.stdout, "the run waits for a decision; answer it with:\n  io-harness approve%s --spec %s %s %s --allow   (or --deny REASON)\n",
				storeFlag(f), shellQuote(specArg(f)), ev.RunID, ev.Outcome.RequestID)
		case harness.StepCapReached, harness.VerificationFailed, harness.TimeBudgetExceeded, harness.CostBudgetExceeded, harness.BudgetCeilingReached:
			fmt.Fprintf(e.stdout, "continue it with a larger budget:\n  io-harness resume%s --max-steps N %s %s\n", storeFlag(f), shellQuote(specArg(f)), ev.RunID)
		case harness.Finished:
			fmt.Fprintf(e.stdout, "answer:\n%s\n", visible.Text(ev.Outcome.Answer))
		}
	}
	return outcomeCode(ev.Outcome.Kind)
}

// outcomeCode maps an outcome to the exit code table.
func outcomeCode(k harness.OutcomeKind) int {
	switch k {
	case harness.Success, harness.Finished:
		return exitOK
	case harness.StepCapReached, harness.VerificationFailed, harness.TimeBudgetExceeded, harness.CostBudgetExceeded, harness.BudgetCeilingReached:
		return exitBudget
	case harness.SchemaUnsatisfied:
		return exitUnsatisfied
	case harness.AwaitingApproval:
		return exitAwaiting
	case harness.Escalated:
		return exitEscalated
	case harness.Cancelled:
		return exitCancelled
	}
	return exitError
}

// answers reads lines from stdin in one goroutine, so that a question can
// be abandoned when the run is interrupted. The goroutine ends at the end
// of input (a blocked terminal read cannot be interrupted; it is the
// process's last read).
type answers struct {
	lines chan string
	start func()
}

func newAnswers(in interface{ Read([]byte) (int, error) }) *answers {
	a := &answers{lines: make(chan string)}
	started := false
	a.start = func() {
		if started {
			return
		}
		started = true
		go func() {
			defer close(a.lines)
			sc := bufio.NewScanner(in)
			for sc.Scan() {
				a.lines <- sc.Text()
			}
		}()
	}
	return a
}

// ask shows an approval request on the terminal and reads the answer:
// y approves, n [reason] denies, d defers. The end of input denies.
func (e *env) ask(ev *event, a *answers, interrupted <-chan struct{}) map[string]any {
	r := ev.Request
	if r == nil {
		r = &request{}
	}
	line := fmt.Sprintf("\napproval needed: %s wants to %s %s", r.Tool, r.Act, r.Target)
	if r.Rule != "" {
		line += fmt.Sprintf(" (rule %q in layer %q)", r.Rule, r.Layer)
	}
	fmt.Fprintln(e.stderr, visible.Text(line))
	if r.Shown != "" {
		fmt.Fprintln(e.stderr, visible.Text(strings.TrimRight(r.Shown, "\n")))
	}
	a.start()
	for {
		fmt.Fprint(e.stderr, "approve? [y]es / [n]o [reason] / [d]efer: ")
		var line string
		var ok bool
		select {
		case line, ok = <-a.lines:
		case <-interrupted:
			return map[string]any{"kind": "deny", "reason": "interrupted"}
		}
		if !ok {
			fmt.Fprintln(e.stderr)
			return map[string]any{"kind": "deny", "reason": "no answer (end of input)"}
		}
		line = strings.TrimSpace(line)
		word, rest, _ := strings.Cut(line, " ")
		switch strings.ToLower(word) {
		case "y", "yes":
			return map[string]any{"kind": "approve"}
		case "n", "no":
			reason := strings.TrimSpace(rest)
			if reason == "" {
				reason = "denied at the terminal"
			}
			return map[string]any{"kind": "deny", "reason": reason}
		case "d", "defer":
			return map[string]any{"kind": "defer"}
		}
	}
}

// progress renders events for a person, or as JSON lines.
type progress struct {
	e        *env
	json     bool
	runID    string
	step     int
	tokens   int64
	usd      float64
	known    bool
	tool     string
	statusOn bool
	// agents are the agents of a tree by path, and whether each ended.
	agents map[string]bool
}

func newProgress(e *env, jsonMode bool, runID string) *progress {
	return &progress{e: e, json: jsonMode, runID: runID, known: true}
}

// line prints a permanent line, clearing the status line first. What it
// prints is shown as visible.Text shows it: the line carries text of the
// model's, of tools and of files, which must not drive the terminal.
func (p *progress) line(format string, args ...any) {
	if p.statusOn {
		fmt.Fprint(p.e.stdout, "\r\x1b[K")
		p.statusOn = false
	}
	fmt.Fprintln(p.e.stdout, visible.Text(fmt.Sprintf(format, args...)))
}

// status redraws the live status line on a terminal.
func (p *progress) status() {
	if !p.e.tty {
		return
	}
	s := fmt.Sprintf("step %d · %s tokens · %s", p.step, thousands(p.tokens), p.money())
	if len(p.agents) > 0 {
		live := 0
		for _, ended := range p.agents {
			if !ended {
				live++
			}
		}
		s += fmt.Sprintf(" · agents %d working of %d", live, len(p.agents)+1)
	}
	if p.tool != "" {
		s += " · " + p.tool
	}
	fmt.Fprintf(p.e.stdout, "\r\x1b[K%s", visible.Text(s))
	p.statusOn = true
}

func (p *progress) money() string {
	if !p.known {
		return fmt.Sprintf("$%.4f + unknown", p.usd)
	}
	return fmt.Sprintf("$%.4f", p.usd)
}

func (p *progress) finish() {
	if p.statusOn {
		fmt.Fprint(p.e.stdout, "\r\x1b[K")
		p.statusOn = false
	}
}

func (p *progress) show(ev *event, raw json.RawMessage) {
	if p.json {
		fmt.Fprintln(p.e.stdout, string(raw))
		return
	}
	if ev.Path != "" && ev.Path != "root" {
		p.showAgent(ev)
		p.status()
		return
	}
	switch ev.Kind {
	case string(harness.EventAgentSpawned), string(harness.EventAgentRefused), string(harness.EventAgentFinished), string(harness.EventModelDone):
		p.showTree(ev, "")
	case string(harness.EventRunStarted):
		p.line("run %s  provider %s", ev.RunID, ev.Provider)
	case string(harness.EventRunResumed):
		p.line("run %s resumed: %s", ev.RunID, ev.Text)
	case string(harness.EventStepStarted):
		p.step, p.tool = ev.Step, ""
		p.line("step %d", ev.Step)
	case string(harness.EventToolCall):
		p.tool = ev.Tool
		p.line("  tool:  %s %s", ev.Tool, oneLine(string(ev.Arguments), 160))
	case string(harness.EventToolResult):
		if ev.IsError {
			p.line("         error: %s", oneLine(ev.Output, 160))
		}
		p.tool = ""
	case string(harness.EventRefusal):
		p.line("  refused: %s", ev.Reason)
	case string(harness.EventRetry):
		p.line("  retry in %dms: %s", ev.WaitMS, ev.Reason)
	case string(harness.EventFallback):
		p.line("  fallback to %s: %s", ev.Provider, ev.Reason)
	case string(harness.EventApprovalResolved):
		p.line("  approval %s: %s", ev.RequestID, strings.TrimSpace(ev.Decision+" "+ev.Reason))
	case string(harness.EventVerification):
		for _, c := range ev.Checks {
			mark := "FAIL"
			if c.Passed {
				mark = "ok"
			}
			p.line("  check %s: %s %s", c.Kind, mark, oneLine(c.Detail, 120))
		}
	case string(harness.EventOutcome):
		o := ev.Outcome
		if o == nil {
			return
		}
		if len(p.agents) == 0 {
			// A tree's totals are its agents' too, counted as they came.
			p.tokens = o.Usage.InputTokens + o.Usage.OutputTokens
			p.usd, p.known = o.Cost.USD, o.Cost.Known
		}
		msg := fmt.Sprintf("outcome: %s after %d step(s), %s tokens, %s", o.Kind, o.Steps, thousands(p.tokens), p.money())
		if o.Reason != "" {
			msg += " (" + o.Reason + ")"
		}
		p.line("%s", msg)
	}
	p.status()
}

// showTree renders the events of a tree that any agent reports the same
// way: model turns (counted in the totals), spawns and their ends. prefix
// names the agent.
func (p *progress) showTree(ev *event, prefix string) {
	switch ev.Kind {
	case string(harness.EventModelDone):
		if ev.Usage != nil {
			p.tokens += ev.Usage.In + ev.Usage.Out
		}
		if ev.Cost != nil {
			p.usd += ev.Cost.USD
			p.known = p.known && ev.Cost.Known
		}
		if t := oneLine(ev.Text, 160); t != "" {
			p.line("%s  model: %s", prefix, t)
		}
	case string(harness.EventAgentSpawned):
		if ev.Agent == nil {
			return
		}
		if p.agents == nil {
			p.agents = map[string]bool{}
		}
		p.agents[ev.Agent.Path] = false
		how := "spawned"
		switch {
		case ev.Agent.Adopted:
			how = "adopted"
		case ev.Agent.Queued:
			how = "spawned, queued for a slot"
		}
		p.line("%s  agent %s %s: %s", prefix, ev.Agent.Path, how, oneLine(ev.Agent.Goal, 120))
	case string(harness.EventAgentRefused):
		p.line("%s  spawn refused: %s", prefix, ev.Reason)
	case string(harness.EventAgentFinished):
		if ev.Agent != nil && ev.Agent.Outcome != nil {
			p.line("%s  agent %s ended %s", prefix, ev.Agent.Path, ev.Agent.Outcome.Kind)
		}
	}
}

// showAgent renders an event of an agent below the root, each line
// prefixed with its path.
func (p *progress) showAgent(ev *event) {
	prefix := "[" + ev.Path + "]"
	switch ev.Kind {
	case string(harness.EventModelDone), string(harness.EventAgentSpawned), string(harness.EventAgentRefused), string(harness.EventAgentFinished):
		p.showTree(ev, prefix)
	case string(harness.EventToolCall):
		p.line("%s  tool:  %s %s", prefix, ev.Tool, oneLine(string(ev.Arguments), 120))
	case string(harness.EventToolResult):
		if ev.IsError {
			p.line("%s         error: %s", prefix, oneLine(ev.Output, 120))
		}
	case string(harness.EventRefusal):
		p.line("%s  refused: %s", prefix, ev.Reason)
	case string(harness.EventOutcome):
		if p.agents != nil {
			p.agents[ev.Path] = true
		}
		if o := ev.Outcome; o != nil {
			p.line("%s  outcome: %s after %d step(s) (%s)", prefix, o.Kind, o.Steps, oneLine(o.Reason, 120))
		}
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
