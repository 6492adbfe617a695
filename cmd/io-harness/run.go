package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/initorigin/io-harness-go/internal/abi"
	"github.com/initorigin/io-harness-go/pkg/harness"
)

// defaultStore is the store of every command that takes --store.
const defaultStore = "io-harness.db"

// runFlags are the flags shared by run, resume and approve.
type runFlags struct {
	store     string
	json      bool
	approvals string
}

func (e *env) addRunFlags(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}, f *runFlags) {
	fs.StringVar(&f.store, "store", defaultStore, "the SQLite store that records the runs")
	fs.BoolVar(&f.json, "json", false, "print every event as one JSON line instead of progress")
	fs.StringVar(&f.approvals, "approvals", "", "how approvals are answered: ask (on the terminal), approve, deny or defer;\n"+
		"default: ask when stdin is a terminal and --json is off, else defer")
}

const runUsage = `Usage: io-harness run [--store PATH] [--json] [--approvals MODE] SPEC.json

Runs the run spec in SPEC.json (docs/spec.md) and shows its progress: the
step, the tokens and cost so far, the tool at work, and the outcome. With
--json every event is printed as one JSON line (docs/abi.md, "Events").
Ctrl-C cancels the run (a second Ctrl-C quits at once). A run that ends
awaiting_approval is answered later with io-harness approve.`

func (e *env) runCmd(args []string) int {
	var f runFlags
	fs := e.flags("run", runUsage)
	e.addRunFlags(fs, &f)
	pos, _, code, ok := parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, "want exactly one SPEC.json, got %d arguments", len(pos))
	}
	spec, err := readSpec(pos[0])
	if err != nil {
		return e.fail("read the spec", err)
	}
	return e.drive(&f, "run.start", map[string]any{"spec": spec})
}

const resumeUsage = `Usage: io-harness resume [--store PATH] [--json] [--reopen] [budget flags] SPEC.json RUN_ID

Continues a stored run from its last committed step. SPEC.json gives the
providers (and optionally the policy and sandbox); the task is the one the
run was stored with. A run that ended on a budget continues when a budget
flag raises it (the budget flags together replace the stored budgets); an
escalated or cancelled run runs again with --reopen.`

func (e *env) resumeCmd(args []string) int {
	var f runFlags
	fs := e.flags("resume", resumeUsage)
	e.addRunFlags(fs, &f)
	b := addBudgetFlags(fs)
	reopen := fs.Bool("reopen", false, "drive an escalated or cancelled run again")
	pos, _, code, ok := parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		return usageError(fs, "want SPEC.json and RUN_ID, got %d arguments", len(pos))
	}
	spec, err := readSpec(pos[0])
	if err != nil {
		return e.fail("read the spec", err)
	}
	p := map[string]any{"spec": spec, "run_id": pos[1], "reopen": *reopen}
	if budgets, set, err := b.budgets(); err != nil {
		return usageError(fs, "%v", err)
	} else if set {
		p["budgets"] = budgets
	}
	return e.drive(&f, "run.resume", p)
}

const approveUsage = `Usage: io-harness approve --spec SPEC.json [--store PATH] [--json] RUN_ID REQUEST_ID (--allow | --deny REASON)

Answers the approval request a stored run awaits (its outcome was
awaiting_approval; the request id is in the outcome and in the trace) and
continues the run, in this process. --spec gives the providers that drive
the rest of the run. The policy is checked again, and exactly the action
the person was shown is performed.`

func (e *env) approveCmd(args []string) int {
	var f runFlags
	fs := e.flags("approve", approveUsage)
	e.addRunFlags(fs, &f)
	specPath := fs.String("spec", "", "the run spec whose providers continue the run (required)")
	allow := fs.Bool("allow", false, "approve the action")
	deny := fs.String("deny", "", "deny the action; the reason is told to the model")
	pos, _, code, ok := parse(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) != 2:
		return usageError(fs, "want RUN_ID and REQUEST_ID, got %d arguments", len(pos))
	case *allow == (*deny != ""):
		return usageError(fs, "give exactly one of --allow and --deny REASON")
	case *specPath == "":
		return usageError(fs, "--spec is required: its providers drive the rest of the run")
	}
	spec, err := readSpec(*specPath)
	if err != nil {
		return e.fail("read the spec", err)
	}
	decision := map[string]any{"kind": "approve"}
	if *deny != "" {
		decision = map[string]any{"kind": "deny", "reason": *deny}
	}
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

// readSpec reads a spec file as raw JSON (the table validates it).
func readSpec(path string) (json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("%s is not valid JSON", path)
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
	mode := f.approvals
	if mode == "" {
		mode = "defer"
		if e.stdinTTY && !f.json {
			mode = "ask"
		}
	}
	switch mode {
	case "ask", "approve", "deny", "defer":
	default:
		fmt.Fprintf(e.stderr, "io-harness: --approvals: want ask, approve, deny or defer, got %q\n", mode)
		return exitUsage
	}
	if mode != "ask" {
		params["approvals"] = mode
	}
	var opened struct {
		Harness uint64 `json:"harness"`
	}
	if err := e.call("harness.open", map[string]any{"store": f.store, "use_environment": true}, &opened); err != nil {
		return e.fail("open the store "+f.store, err)
	}
	h := opened.Harness
	defer e.a.Close(h, 10*time.Second)
	params["harness"] = h
	var started struct {
		Run   uint64 `json:"run"`
		RunID string `json:"run_id"`
	}
	if err := e.call(method, params, &started); err != nil {
		return e.fail(strings.TrimPrefix(method, "run."), err)
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
	for {
		batch := e.a.Poll(h, 200*time.Millisecond, 256)
		if batch == nil {
			continue
		}
		var raws []json.RawMessage
		if err := json.Unmarshal(batch, &raws); err != nil {
			return e.fail("read events", err)
		}
		for _, raw := range raws {
			var ev event
			if err := json.Unmarshal(raw, &ev); err != nil {
				return e.fail("read an event", err)
			}
			if ev.Kind == abi.KindClosed {
				return e.fail("follow the run", errors.New("the harness closed"))
			}
			if ev.Run != started.Run {
				continue
			}
			p.show(&ev, raw)
			if ev.Kind == abi.KindApprovalPending && mode == "ask" {
				d := e.ask(&ev, answers, interrupted)
				if err := e.call("approval.resolve", map[string]any{"harness": h, "run_id": ev.RunID,
					"request_id": ev.RequestID, "decision": d}, nil); err != nil {
					fmt.Fprintf(e.stderr, "io-harness: answer the approval: %v\n", err)
				}
			}
			if ev.Kind == abi.KindDone {
				p.finish()
				return e.doneCode(&ev, f.json)
			}
		}
	}
}

// doneCode reports a run's end and returns its exit code.
func (e *env) doneCode(ev *event, jsonMode bool) int {
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
			fmt.Fprintf(e.stdout, "the run waits for a decision; answer it with:\n  io-harness approve --spec SPEC.json %s %s --allow   (or --deny REASON)\n",
				ev.RunID, ev.Outcome.RequestID)
		case harness.StepCapReached, harness.TimeBudgetExceeded, harness.CostBudgetExceeded:
			fmt.Fprintf(e.stdout, "continue it with a larger budget:\n  io-harness resume --max-steps N SPEC.json %s\n", ev.RunID)
		}
	}
	return outcomeCode(ev.Outcome.Kind)
}

// outcomeCode maps an outcome to the exit code table.
func outcomeCode(k harness.OutcomeKind) int {
	switch k {
	case harness.Success:
		return exitOK
	case harness.StepCapReached, harness.TimeBudgetExceeded, harness.CostBudgetExceeded:
		return exitBudget
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
	fmt.Fprintf(e.stderr, "\napproval needed: %s wants to %s %s", r.Tool, r.Act, r.Target)
	if r.Rule != "" {
		fmt.Fprintf(e.stderr, " (rule %q in layer %q)", r.Rule, r.Layer)
	}
	fmt.Fprintln(e.stderr)
	if r.Shown != "" {
		fmt.Fprintln(e.stderr, strings.TrimRight(r.Shown, "\n"))
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
}

func newProgress(e *env, jsonMode bool, runID string) *progress {
	return &progress{e: e, json: jsonMode, runID: runID, known: true}
}

// line prints a permanent line, clearing the status line first.
func (p *progress) line(format string, args ...any) {
	if p.statusOn {
		fmt.Fprint(p.e.stdout, "\r\x1b[K")
		p.statusOn = false
	}
	fmt.Fprintf(p.e.stdout, format+"\n", args...)
}

// status redraws the live status line on a terminal.
func (p *progress) status() {
	if !p.e.tty {
		return
	}
	s := fmt.Sprintf("step %d · %s tokens · %s", p.step, thousands(p.tokens), p.money())
	if p.tool != "" {
		s += " · " + p.tool
	}
	fmt.Fprintf(p.e.stdout, "\r\x1b[K%s", s)
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
	switch ev.Kind {
	case string(harness.EventRunStarted):
		p.line("run %s  provider %s", ev.RunID, ev.Provider)
	case string(harness.EventRunResumed):
		p.line("run %s resumed: %s", ev.RunID, ev.Text)
	case string(harness.EventStepStarted):
		p.step, p.tool = ev.Step, ""
		p.line("step %d", ev.Step)
	case string(harness.EventModelDone):
		if ev.Usage != nil {
			p.tokens += ev.Usage.In + ev.Usage.Out
		}
		if ev.Cost != nil {
			p.usd += ev.Cost.USD
			p.known = p.known && ev.Cost.Known
		}
		if t := oneLine(ev.Text, 160); t != "" {
			p.line("  model: %s", t)
		}
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
		p.tokens = o.Usage.InputTokens + o.Usage.OutputTokens
		p.usd, p.known = o.Cost.USD, o.Cost.Known
		msg := fmt.Sprintf("outcome: %s after %d step(s), %s tokens, %s", o.Kind, o.Steps, thousands(p.tokens), p.money())
		if o.Reason != "" {
			msg += " (" + o.Reason + ")"
		}
		p.line("%s", msg)
	}
	p.status()
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
