// Package traceview shows runs to people: one self-contained HTML page
// for a run or a tree of runs ([WriteHTML]), and a loopback HTTP server
// that serves every run of a store and updates while runs progress
// ([Server]).
//
// A page holds a timeline per agent with its steps, model calls and tool
// calls; tokens and cost over time; every policy verdict and approval; the
// verification gate's output per step; and the diff of every write. It
// needs no network: the script, the styles and the data are inside it, and
// its content security policy forbids anything else. Long runs and large
// trees stay usable because rows are drawn only where the window shows
// them.
//
// The package reads the store and the events' JSON form (docs/abi.md,
// "Events"); it does not import the harness.
package traceview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Bounds on what a page holds of one piece of text; the rest is cut with a
// marker, and the store keeps all of it (io-harness trace --json).
const (
	maxText   = 4096
	maxArgs   = 4096
	maxOutput = 2048
	maxDiff   = 16384
	maxGoal   = 1024
)

// View is what a page shows: a run and the runs it started, as the store
// holds them.
type View struct {
	// Root is the id of the run the page is about.
	Root string `json:"root"`
	// Agents are the run and its descendants, depth first; Agents[0] is
	// the root.
	Agents []*Agent `json:"agents"`
	// Version changes whenever anything shown changes.
	Version string `json:"version"`
	// Live is set on pages the server serves: they ask it for newer
	// versions.
	Live bool `json:"live,omitempty"`
	// Generated is when the view was read, in Unix milliseconds.
	Generated int64 `json:"generated"`
}

// Agent is one run of the tree.
type Agent struct {
	ID       string `json:"id"`
	ParentID string `json:"parent_id,omitempty"`
	Parent   int    `json:"parent"` // index in View.Agents; -1 for the root
	Depth    int    `json:"depth"`
	Path     string `json:"path"`
	Goal     string `json:"goal,omitempty"`
	Provider string `json:"provider,omitempty"`
	Status   string `json:"status"`
	Outcome  string `json:"outcome,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Started  int64  `json:"started"`
	Finished int64  `json:"finished,omitempty"`
	Steps    int    `json:"steps"`
	Usage    Tokens `json:"usage"`
	Cost     Money  `json:"cost"`
	Lost     *Spend `json:"lost,omitempty"`
	PausedMS int64  `json:"paused_ms,omitempty"`
	// StepList holds each committed step.
	StepList []*Step `json:"step_list"`
	// Unstepped are the provider calls of no committed step (an
	// escalation's, or a crash's).
	Unstepped []Attempt `json:"unstepped,omitempty"`
	// Approvals are the run's approval requests and their state.
	Approvals []Approval `json:"approvals,omitempty"`
	// Counts sums what happened, for the page's badges.
	Counts Counts `json:"counts"`
}

// Tokens counts tokens.
type Tokens struct {
	In        int64 `json:"in"`
	Out       int64 `json:"out"`
	CacheRead int64 `json:"cache_read,omitempty"`
}

// Money is an amount in US dollars; Known is false when part of it could
// not be priced.
type Money struct {
	USD   float64 `json:"usd"`
	Known bool    `json:"known"`
}

// Spend is tokens and money.
type Spend struct {
	Usage Tokens `json:"usage"`
	Cost  Money  `json:"cost"`
}

// Counts are a run's notable events.
type Counts struct {
	Refusals  int `json:"refusals"`
	Errors    int `json:"errors"`
	Retries   int `json:"retries"`
	Fallbacks int `json:"fallbacks"`
	Approvals int `json:"approvals"`
	Writes    int `json:"writes"`
	Denials   int `json:"denials"`
}

// Step is one committed step.
type Step struct {
	N        int    `json:"n"`
	Start    int64  `json:"start"`
	End      int64  `json:"end"`
	Provider string `json:"provider"`
	Usage    Tokens `json:"usage"`
	Cost     Money  `json:"cost"`
	// Total is the run's spend up to and with this step.
	Total    Spend      `json:"total"`
	Text     string     `json:"text,omitempty"`
	Model    *ModelCall `json:"model,omitempty"`
	Tools    []*Tool    `json:"tools,omitempty"`
	Attempts []Attempt  `json:"attempts,omitempty"`
	// Verdicts are policy verdicts of the step that belong to no tool call
	// (the gate's hidden files, a provider's host).
	Verdicts  []Verdict  `json:"verdicts,omitempty"`
	Approvals []Decision `json:"approvals,omitempty"`
	Gate      *Gate      `json:"gate,omitempty"`
	Notes     []Note     `json:"notes,omitempty"`
	Verified  bool       `json:"verified"`
}

// ModelCall is the provider call that answered a step.
type ModelCall struct {
	Start        int64  `json:"start"`
	End          int64  `json:"end"`
	LatencyMS    int64  `json:"latency_ms"`
	FirstTokenMS int64  `json:"first_token_ms,omitempty"`
	Model        string `json:"model,omitempty"`
	StopReason   string `json:"stop_reason,omitempty"`
}

// Tool is one tool call and what came of it.
type Tool struct {
	Name      string    `json:"name"`
	CallID    string    `json:"call_id"`
	Arguments string    `json:"arguments,omitempty"`
	Start     int64     `json:"start,omitempty"`
	End       int64     `json:"end,omitempty"`
	Outcome   string    `json:"outcome"` // ok, error, refused, deferred, not_run
	Refusal   string    `json:"refusal,omitempty"`
	Output    string    `json:"output,omitempty"`
	Verdicts  []Verdict `json:"verdicts,omitempty"`
	// Write is the file a write or an edit changed, and Diff the change.
	Write    string `json:"write,omitempty"`
	Diff     string `json:"diff,omitempty"`
	DiffNote string `json:"diff_note,omitempty"`
}

// Verdict is a policy verdict.
type Verdict struct {
	Act    string `json:"act"`
	Target string `json:"target"`
	Effect string `json:"effect"`
	Rule   string `json:"rule,omitempty"`
	Layer  string `json:"layer,omitempty"`
}

// Decision is an approval asked or answered during a step.
type Decision struct {
	RequestID string `json:"request_id"`
	Event     string `json:"event"` // requested or resolved
	Tool      string `json:"tool,omitempty"`
	Act       string `json:"act,omitempty"`
	Target    string `json:"target,omitempty"`
	Decision  string `json:"decision,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Approval is an approval request as the store holds it.
type Approval struct {
	ID       string `json:"id"`
	Step     int    `json:"step"`
	Tool     string `json:"tool"`
	Act      string `json:"act"`
	Target   string `json:"target"`
	State    string `json:"state"`
	Shown    string `json:"shown,omitempty"`
	Decision string `json:"decision,omitempty"`
}

// Attempt is a provider call that failed, or a switch of provider.
type Attempt struct {
	Step      int    `json:"step"`
	Attempt   int    `json:"attempt"`
	Provider  string `json:"provider"`
	ErrorKind string `json:"error_kind,omitempty"`
	Error     string `json:"error,omitempty"`
	WaitMS    int64  `json:"wait_ms,omitempty"`
	LatencyMS int64  `json:"latency_ms"`
	Fallback  bool   `json:"fallback,omitempty"`
}

// Gate is the verification gate's verdict after a step.
type Gate struct {
	Passed bool    `json:"passed"`
	Checks []Check `json:"checks,omitempty"`
	Text   string  `json:"text,omitempty"`
}

// Check is one check of the gate.
type Check struct {
	Kind       string `json:"kind"`
	File       string `json:"file,omitempty"`
	Passed     bool   `json:"passed"`
	Detail     string `json:"detail,omitempty"`
	Output     string `json:"output,omitempty"`
	Backend    string `json:"backend,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// Note is something else the model was told, or that happened.
type Note struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// event is the part of a stored event a page shows.
type event struct {
	Seq          int64           `json:"seq"`
	Step         int             `json:"step"`
	Kind         string          `json:"kind"`
	At           time.Time       `json:"at"`
	Text         string          `json:"text"`
	Provider     string          `json:"provider"`
	LatencyMS    int64           `json:"latency_ms"`
	FirstTokenMS int64           `json:"first_token_ms"`
	Model        string          `json:"model"`
	StopReason   string          `json:"stop_reason"`
	Tool         string          `json:"tool"`
	CallID       string          `json:"call_id"`
	Arguments    json.RawMessage `json:"arguments"`
	IsError      bool            `json:"is_error"`
	Reason       string          `json:"reason"`
	ErrorKind    string          `json:"error_kind"`
	Act          string          `json:"act"`
	Target       string          `json:"target"`
	Effect       string          `json:"effect"`
	Rule         string          `json:"rule"`
	Layer        string          `json:"layer"`
	RequestID    string          `json:"request_id"`
	Decision     string          `json:"decision"`
	Passed       *bool           `json:"passed"`
	Checks       []struct {
		Kind     string        `json:"kind"`
		File     string        `json:"file"`
		Passed   bool          `json:"passed"`
		Detail   string        `json:"detail"`
		Output   string        `json:"output"`
		Backend  string        `json:"backend"`
		Duration time.Duration `json:"duration"`
	} `json:"checks"`
}

// Load reads the run rootID and every run below it from st.
//
// # Errors
//
// An unknown run wraps store.ErrNotFound; a store that fails is its error.
func Load(ctx context.Context, st store.Reader, rootID string) (*View, error) {
	root, err := st.Run(ctx, rootID)
	if err != nil {
		return nil, err
	}
	v := &View{Root: rootID, Generated: time.Now().UnixMilli()}
	var version strings.Builder
	type item struct {
		run    *store.Run
		parent int
		depth  int
	}
	// The tree's runs in the order they were created, by parent: a
	// run's agents are drawn in the order they were spawned, whatever
	// order they started in.
	treeID := root.RootID
	if treeID == "" {
		treeID = root.ID
	}
	tree, err := st.Runs(ctx, store.RunFilter{RootID: treeID, Limit: -1})
	if err != nil {
		return nil, err
	}
	children := map[string][]*store.Run{}
	for i := range tree {
		if p := tree[i].ParentID; p != "" && tree[i].ID != treeID {
			children[p] = append(children[p], &tree[i])
		}
	}
	stack := []item{{root, -1, 0}}
	seen := map[string]bool{}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[it.run.ID] {
			continue // a cycle in a damaged store
		}
		seen[it.run.ID] = true
		a, last, err := loadAgent(ctx, st, it.run)
		if err != nil {
			return nil, err
		}
		a.Parent, a.Depth = it.parent, it.depth
		idx := len(v.Agents)
		v.Agents = append(v.Agents, a)
		fmt.Fprintf(&version, "%s:%s:%d:%d;", a.ID, a.Status, a.Steps, last)
		// The stack pops the last pushed: pushing the last spawned first
		// draws the first spawned first.
		kids := children[it.run.ID]
		for i := len(kids) - 1; i >= 0; i-- {
			stack = append(stack, item{kids[i], idx, it.depth + 1})
		}
	}
	v.Version = shortHash(version.String())
	return v, nil
}

// loadAgent reads one run's record, steps, events and approvals into an
// Agent, and returns its last event's number too.
func loadAgent(ctx context.Context, st store.Reader, r *store.Run) (*Agent, int64, error) {
	a := &Agent{ID: r.ID, ParentID: r.ParentID, Path: r.AgentPath, Provider: r.Provider, Status: string(r.Status),
		Outcome: r.Outcome, Started: r.StartedAt.UnixMilli(), Steps: r.Steps,
		Usage: Tokens{In: r.Usage.InputTokens, Out: r.Usage.OutputTokens, CacheRead: r.Usage.CacheReadTokens},
		Cost:  Money{USD: r.Cost.USD, Known: r.Cost.Known}, PausedMS: r.Paused.Milliseconds()}
	if a.Path == "" {
		a.Path = "root"
	}
	if !r.FinishedAt.IsZero() {
		a.Finished = r.FinishedAt.UnixMilli()
	}
	if r.LostUsage.Total() > 0 {
		a.Lost = &Spend{Usage: Tokens{In: r.LostUsage.InputTokens, Out: r.LostUsage.OutputTokens}, Cost: Money{USD: r.LostCost.USD, Known: r.LostCost.Known}}
	}
	var task struct {
		Goal string `json:"goal"`
	}
	if json.Unmarshal(r.Task, &task) == nil {
		a.Goal = clip(task.Goal, maxGoal)
	}
	var out struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(r.OutcomeJSON, &out) == nil {
		a.Reason = clip(out.Reason, maxText)
	}
	steps, err := st.Steps(ctx, r.ID)
	if err != nil {
		return nil, 0, err
	}
	stored, err := st.Events(ctx, r.ID, 0, 0)
	if err != nil {
		return nil, 0, err
	}
	attempts, err := st.Attempts(ctx, r.ID)
	if err != nil {
		return nil, 0, err
	}
	approvals, err := st.Approvals(ctx, r.ID)
	if err != nil {
		return nil, 0, err
	}
	var last int64
	evs := make([]event, 0, len(stored))
	for _, e := range stored {
		var ev event
		if json.Unmarshal(e.Data, &ev) != nil {
			continue
		}
		ev.Seq, ev.Step, ev.Kind = e.Seq, e.Step, e.Kind
		evs = append(evs, ev)
		last = e.Seq
	}
	a.build(steps, evs)
	for _, at := range attempts {
		a.Unstepped = append(a.Unstepped, attemptOf(at))
	}
	for _, ap := range approvals {
		d := Approval{ID: ap.ID, Step: ap.Step, Tool: ap.Tool, Act: ap.Act, Target: ap.Target, State: string(ap.State), Shown: clip(ap.Shown, maxDiff)}
		var dec struct {
			Kind   string `json:"kind"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(ap.Decision, &dec) == nil {
			d.Decision = strings.TrimSpace(dec.Kind + " " + dec.Reason)
		}
		a.Approvals = append(a.Approvals, d)
	}
	return a, last, nil
}

func attemptOf(at store.Attempt) Attempt {
	return Attempt{Step: at.Step, Attempt: at.Attempt, Provider: at.Provider, ErrorKind: at.ErrorKind, Error: clip(at.Error, maxOutput),
		WaitMS: at.Wait.Milliseconds(), LatencyMS: at.Latency.Milliseconds()}
}

// build turns the committed steps and the events into the agent's steps.
func (a *Agent) build(steps []store.Step, evs []event) {
	byStep := map[int][]event{}
	for _, e := range evs {
		byStep[e.Step] = append(byStep[e.Step], e)
	}
	files := files{}
	var total Spend
	total.Cost.Known = true
	for i := range steps {
		st := &steps[i]
		s := &Step{N: st.Step, Start: st.StartedAt.UnixMilli(), End: st.FinishedAt.UnixMilli(), Provider: st.Provider,
			Usage: Tokens{In: st.Usage.InputTokens, Out: st.Usage.OutputTokens, CacheRead: st.Usage.CacheReadTokens},
			Cost:  Money{USD: st.Cost.USD, Known: st.Cost.Known}, Text: clip(st.Assistant.Content, maxText), Verified: st.Verified}
		total.Usage.In += s.Usage.In
		total.Usage.Out += s.Usage.Out
		total.Cost.USD += s.Cost.USD
		total.Cost.Known = total.Cost.Known && s.Cost.Known
		s.Total = total
		last := ""
		for _, at := range st.Attempts {
			if last != "" && at.Provider != last {
				s.Attempts = append(s.Attempts, Attempt{Step: at.Step, Attempt: at.Attempt, Provider: at.Provider, Fallback: true})
				a.Counts.Fallbacks++
			}
			last = at.Provider
			if at.ErrorKind != "" {
				s.Attempts = append(s.Attempts, attemptOf(at))
				if at.Wait > 0 {
					a.Counts.Retries++
				}
			}
		}
		// The calls, in the model's order, with what the step recorded.
		calls := map[string]*Tool{}
		raw := map[string]json.RawMessage{}
		for _, c := range st.Assistant.ToolCalls {
			t := &Tool{Name: c.Name, CallID: c.ID, Arguments: clip(string(c.Arguments), maxArgs), Outcome: "ok"}
			calls[c.ID], raw[c.ID] = t, c.Arguments
			s.Tools = append(s.Tools, t)
		}
		for _, o := range st.Observations {
			switch o.Kind {
			case store.ObservationTool:
				t := calls[o.CallID]
				if t == nil {
					continue
				}
				t.Output = clip(o.Output, maxOutput)
				switch {
				case o.Refusal != "":
					t.Outcome, t.Refusal = "refused", o.Refusal
					a.Counts.Refusals++
				case strings.HasPrefix(o.Output, "[awaiting approval]"):
					t.Outcome = "deferred"
				case strings.HasPrefix(o.Output, "[not run]"):
					t.Outcome = "not_run"
				case o.IsError:
					t.Outcome = "error"
					a.Counts.Errors++
				}
				files.apply(t, raw[o.CallID], o)
				if t.Write != "" {
					a.Counts.Writes++
				}
			case store.ObservationVerification:
				if s.Gate == nil {
					s.Gate = &Gate{}
				}
				s.Gate.Text = clip(o.Output, maxText)
				s.Gate.Passed = !o.IsError
			default:
				s.Notes = append(s.Notes, Note{Kind: string(o.Kind), Text: clip(o.Output, maxText)})
			}
		}
		var current *Tool
		for _, e := range byStep[st.Step] {
			switch e.Kind {
			case "model_done":
				s.Model = &ModelCall{Start: e.At.UnixMilli() - e.LatencyMS, End: e.At.UnixMilli(), LatencyMS: e.LatencyMS,
					FirstTokenMS: e.FirstTokenMS, Model: e.Model, StopReason: e.StopReason}
			case "tool_call":
				if t := calls[e.CallID]; t != nil {
					t.Start = e.At.UnixMilli()
					current = t
				}
			case "tool_result":
				if t := calls[e.CallID]; t != nil {
					t.End = e.At.UnixMilli()
				}
				current = nil
			case "policy":
				v := Verdict{Act: e.Act, Target: e.Target, Effect: e.Effect, Rule: e.Rule, Layer: e.Layer}
				if e.Effect == "deny" {
					a.Counts.Denials++
				}
				if current != nil {
					current.Verdicts = append(current.Verdicts, v)
				} else {
					s.Verdicts = append(s.Verdicts, v)
				}
			case "approval_requested", "approval_resolved":
				d := Decision{RequestID: e.RequestID, Event: strings.TrimPrefix(e.Kind, "approval_"), Tool: e.Tool, Act: e.Act,
					Target: e.Target, Decision: e.Decision, Reason: clip(e.Reason, maxOutput)}
				s.Approvals = append(s.Approvals, d)
				if e.Kind == "approval_requested" {
					a.Counts.Approvals++
				}
			case "verification":
				if s.Gate == nil {
					s.Gate = &Gate{}
				}
				if e.Passed != nil {
					s.Gate.Passed = *e.Passed
				}
				for _, c := range e.Checks {
					s.Gate.Checks = append(s.Gate.Checks, Check{Kind: c.Kind, File: c.File, Passed: c.Passed, Detail: clip(c.Detail, maxOutput),
						Output: clip(c.Output, maxOutput), Backend: c.Backend, DurationMS: c.Duration.Milliseconds()})
				}
			case "context_fold", "in_doubt":
				s.Notes = append(s.Notes, Note{Kind: e.Kind, Text: clip(e.Reason+e.Text, maxOutput)})
			}
		}
		a.StepList = append(a.StepList, s)
	}
}

// files follows what a run's tools wrote, so that a write is shown as a
// diff against the content it replaced, when the trace knows it: a file
// the run created, wrote, edited or read whole before.
type files map[string]string

// readHeader is read_file's first line: "path (lines A-B of N)".
var readHeader = regexp.MustCompile(`^(.+) \(lines (\d+)-(\d+) of (\d+)\)$`)

// apply records what a successful call of a workspace tool says about its
// file, and gives t, a write or an edit, its diff.
func (f files) apply(t *Tool, args json.RawMessage, o store.Observation) {
	if o.IsError || o.Refusal != "" {
		return
	}
	switch t.Name {
	case "write_file":
		var a struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		if json.Unmarshal(args, &a) != nil {
			return
		}
		verb, rest, _ := strings.Cut(o.Output, " ")
		p, _, ok := strings.Cut(rest, " (")
		if !ok || p == "" {
			p = a.Path
		}
		old, known := f[p]
		if verb == "created" {
			old, known = "", true
		}
		t.Write = p
		t.Diff = clip(approve.Diff(p, old, a.Content), maxDiff)
		if !known {
			t.DiffNote = "the content this write replaced is not in the trace; the new content is shown whole"
		}
		f[p] = a.Content
	case "edit_file":
		var a struct {
			Path       string `json:"path"`
			OldText    string `json:"old_text"`
			NewText    string `json:"new_text"`
			ReplaceAll bool   `json:"replace_all"`
		}
		if json.Unmarshal(args, &a) != nil {
			return
		}
		p := a.Path
		if rest, ok := strings.CutPrefix(o.Output, "edited "); ok {
			if q, _, ok := strings.Cut(rest, ": "); ok {
				p = q
			}
		}
		t.Write = p
		if old, ok := f[p]; ok && strings.Contains(old, a.OldText) {
			n := 1
			if a.ReplaceAll {
				n = -1
			}
			now := strings.Replace(old, a.OldText, a.NewText, n)
			t.Diff = clip(approve.Diff(p, old, now), maxDiff)
			f[p] = now
			return
		}
		t.Diff = clip(approve.Diff(p, a.OldText, a.NewText), maxDiff)
		t.DiffNote = "the file around this edit is not in the trace; the replaced text is shown alone"
		delete(f, p)
	case "read_file":
		head, body, _ := strings.Cut(o.Output, "\n")
		if p, ok := strings.CutSuffix(head, " (empty file, 0 lines)"); ok {
			f[p] = ""
			return
		}
		m := readHeader.FindStringSubmatch(head)
		if m == nil || m[2] != "1" || m[3] != m[4] || strings.Contains(body, "\n[line") || strings.HasPrefix(body, "[line") {
			return // a part of the file only
		}
		f[m[1]] = body
	case "exec":
		// A command may have changed any file it was allowed to.
		clear(f)
	}
}

// clip cuts s to n bytes on a character boundary, saying how much was cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[… %d more bytes in the store]", len(s)-cut)
}

// shortHash is a short digest of s, for versions.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
