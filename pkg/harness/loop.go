package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// minOutputTokens is the smallest output cap worth paying for: fewer
// tokens cannot hold a tool call, so a request that could ask for no more
// is not sent and the run ends on its budget instead.
const minOutputTokens = 32

// loop drives the run from step next until an outcome.
func (r *runner) loop(ctx context.Context, next int) (*Result, error) {
	if t := time.Duration(r.task.Budgets.Time); t > 0 {
		r.deadline = r.startedAt.Add(t)
	}
	for n := next; ; n++ {
		switch {
		case n > r.task.maxSteps():
			return r.finish(ctx, Outcome{Kind: StepCapReached,
				Reason: fmt.Sprintf("the step budget of %d is used up", r.task.maxSteps())}, nil)
		case ctx.Err() != nil:
			return r.finish(ctx, Outcome{Kind: Cancelled, Reason: ctx.Err().Error()}, nil)
		case r.timeUp():
			return r.finish(ctx, r.timeOutcome(), nil)
		}
		out, attempts, err := r.step(ctx, n)
		if err != nil {
			return nil, err
		}
		if out != nil {
			return r.finish(ctx, *out, attempts)
		}
	}
}

func (r *runner) timeUp() bool { return !r.deadline.IsZero() && !time.Now().Before(r.deadline) }

func (r *runner) timeOutcome() Outcome {
	return Outcome{Kind: TimeBudgetExceeded,
		Reason: fmt.Sprintf("the time budget of %s is used up", time.Duration(r.task.Budgets.Time))}
}

// step runs step n: one model turn, its tool calls, the verification gate,
// and one commit. It returns an outcome when the run ends in this step,
// with the provider attempts of a step that did not commit.
func (r *runner) step(ctx context.Context, n int) (*Outcome, []store.Attempt, error) {
	started := time.Now()
	r.cur = n
	sctx, cancel := r.stepContext(ctx)
	defer cancel()

	// What the model must be told before its turn: calls in doubt after a
	// crash, and decisions on requests that waited for a person (carried
	// out here).
	r.emit(Event{Kind: EventStepStarted, Step: n})
	var pre []store.Observation
	var reported []int64
	if len(r.inDoubt) > 0 {
		pre = append(pre, r.inDoubtObservation())
		for _, in := range r.inDoubt {
			reported = append(reported, in.ID)
		}
	}
	decisions, applied, err := r.applyDecisions(sctx, n)
	if err != nil {
		return nil, nil, err
	}
	r.pre = append(pre, decisions...)

	resp, prov, attempts, out := r.complete(ctx, sctx, n, r.request())
	if out != nil {
		return out, attempts, nil
	}
	cost := resp.Cost
	r.emit(Event{Kind: EventModelDone, Step: n, Provider: prov, Text: resp.Text, Usage: &resp.Usage, Cost: &cost,
		LatencyMS: attempts[len(attempts)-1].Latency.Milliseconds()})

	obs := append([]store.Observation(nil), r.pre...)
	assistant := provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls}
	var deferred []store.Approval
	for _, call := range resp.ToolCalls {
		if len(deferred) > 0 {
			// Nothing after a call that waits for a person runs: the
			// person decides with the workspace as it was.
			obs = append(obs, store.Observation{Kind: store.ObservationTool, CallID: call.ID, Tool: call.Name, Arguments: call.Arguments,
				IsError: true, Output: "[not run] an earlier call of this turn waits for a person's decision; call it again afterwards if it is still needed"})
			continue
		}
		o, d, err := r.callTool(sctx, n, call)
		if err != nil {
			return nil, nil, err
		}
		obs = append(obs, o)
		if d != nil {
			deferred = append(deferred, *d)
		}
	}
	if len(resp.ToolCalls) == 0 {
		obs = append(obs, store.Observation{Kind: store.ObservationNote,
			Output: "You did not call a tool. You act only through the tools; the run ends when the verification passes."})
	}
	passed := false
	if len(deferred) == 0 {
		var vobs store.Observation
		if passed, vobs, err = r.verify(sctx, n); err != nil {
			return nil, nil, err
		}
		obs = append(obs, vobs)
	}
	r.emit(Event{Kind: EventCheckpoint, Step: n})

	commit := &store.Commit{
		Step: store.Step{RunID: r.runID, Step: n, StartedAt: started, FinishedAt: time.Now(), Provider: prov,
			Assistant: assistant, Observations: obs, Usage: resp.Usage, Cost: cost, Verified: passed, Attempts: attempts},
		Events:    r.takePending(),
		InDoubt:   reported,
		Approvals: deferred,
		Applied:   applied,
	}
	if r.rememberedDirty {
		if commit.Remembered, err = json.Marshal(r.remembered); err != nil {
			return nil, nil, wrap(ErrState, "encode remembered rules", err)
		}
	}
	// A step whose effects happened is recorded even if the caller has
	// just cancelled: the commit does not take the run's cancellation.
	if err := r.st.CommitStep(context.WithoutCancel(ctx), commit); err != nil {
		return nil, nil, wrap(ErrState, fmt.Sprintf("commit step %d", n), err)
	}
	r.history = append(r.history, commit.Step)
	r.inDoubt, r.decided, r.pre, r.rememberedDirty = nil, nil, nil, false
	r.usage = r.usage.Add(resp.Usage)
	r.cost = r.cost.Add(cost)
	switch {
	case len(deferred) > 0:
		d := deferred[0]
		return &Outcome{Kind: AwaitingApproval, RequestID: d.ID,
			Reason: fmt.Sprintf("%s %s waits for a person's decision (request %s)", d.Act, d.Target, d.ID)}, nil, nil
	case passed:
		return &Outcome{Kind: Success, Reason: "every verification check passed"}, nil, nil
	}
	return nil, nil, nil
}

// stepContext bounds a step by the time budget.
func (r *runner) stepContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, r.deadline)
}

// complete gets one model turn, retrying transient failures with backoff
// and falling back along the provider chain. It returns an outcome instead
// when the run must end: a budget that cannot pay for the request, a
// cancellation, the time budget, or escalation.
func (r *runner) complete(ctx, sctx context.Context, n int, req *provider.Request) (*provider.Response, string, []store.Attempt, *Outcome) {
	var attempts []store.Attempt
	var last *provider.Error
	var note string // why the last provider stopped early, if it did
	retries := r.task.maxRetries()
	onText := func(s string) { r.emit(Event{Kind: EventModelDelta, Step: n, Text: s}) }
	for pi := r.active; pi < len(r.providers); pi++ {
		p := r.providers[pi]
		if pi != r.active {
			r.emit(Event{Kind: EventFallback, Step: n, Provider: p.Name(), ErrorKind: last.Kind,
				Reason: "falling back after " + last.Error()})
		}
		for try := 0; try <= retries; try++ {
			preq, out := r.capRequest(p, req)
			if out != nil {
				return nil, "", attempts, out
			}
			t0 := time.Now()
			resp, err := p.Complete(sctx, preq, onText)
			a := store.Attempt{Step: n, Attempt: len(attempts) + 1, Provider: p.Name(), Latency: time.Since(t0), At: t0}
			if err == nil {
				attempts = append(attempts, a)
				r.active = pi
				return resp, p.Name(), attempts, nil
			}
			pe := provider.AsError(err)
			if pe == nil {
				// The contract asks for *provider.Error; an unclassified
				// error is most likely the transport's.
				pe = &provider.Error{Provider: p.Name(), Kind: provider.KindTransport, Message: err.Error(), Err: err}
			}
			a.ErrorKind, a.Error, a.Status = string(pe.Kind), pe.Error(), pe.Status
			switch {
			case ctx.Err() != nil:
				attempts = append(attempts, a)
				return nil, "", attempts, &Outcome{Kind: Cancelled, Reason: ctx.Err().Error()}
			case r.timeUp():
				attempts = append(attempts, a)
				out := r.timeOutcome()
				return nil, "", attempts, &out
			}
			last = pe
			if !pe.Transient() || try == retries {
				attempts = append(attempts, a)
				break
			}
			wait := r.backoff(try, pe.RetryAfter)
			if !r.deadline.IsZero() && time.Now().Add(wait).After(r.deadline) {
				note = fmt.Sprintf("; the %s wait before a retry would pass the time budget", wait.Round(time.Millisecond))
				a.Error += note
				attempts = append(attempts, a)
				break
			}
			note = ""
			a.Wait = wait
			attempts = append(attempts, a)
			r.emit(Event{Kind: EventRetry, Step: n, Provider: p.Name(), Attempt: a.Attempt, ErrorKind: pe.Kind,
				WaitMS: wait.Milliseconds(), Reason: pe.Error()})
			if !sleep(ctx, wait) {
				return nil, "", attempts, &Outcome{Kind: Cancelled, Reason: ctx.Err().Error()}
			}
		}
	}
	return nil, "", attempts, &Outcome{Kind: Escalated, Retryable: last.Transient(),
		Reason: fmt.Sprintf("every provider failed; the last failure: %s%s", last.Error(), note)}
}

// backoff is the wait before retry number try+1.
func (r *runner) backoff(try int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	base, max := time.Duration(r.opts.Backoff.Base), time.Duration(r.opts.Backoff.Max)
	if base == 0 {
		base = 500 * time.Millisecond
	}
	if max == 0 {
		max = 30 * time.Second
	}
	d := base << min(try, 20)
	if d > max || d <= 0 {
		d = max
	}
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// capRequest applies the token and money budgets to req for provider p
// before anything is spent: the request asks for no more output than the
// budgets can pay for, and a request whose input alone would cross a
// budget is not sent.
func (r *runner) capRequest(p provider.Provider, req *provider.Request) (*provider.Request, *Outcome) {
	b := &r.task.Budgets
	if b.MaxTokens == 0 && b.MaxCostUSD == 0 {
		return req, nil
	}
	var in int64
	if tc, ok := p.(provider.TokenCounter); ok {
		in = tc.CountInput(req)
	} else {
		in = provider.EstimateInput(req)
	}
	capped := *req
	limit := func(n int64) {
		if capped.MaxOutputTokens == 0 || n < capped.MaxOutputTokens {
			capped.MaxOutputTokens = n
		}
	}
	if b.MaxTokens > 0 {
		left := b.MaxTokens - r.usage.Total()
		if left-in < minOutputTokens {
			return nil, &Outcome{Kind: CostBudgetExceeded, Budget: BudgetTokens,
				Reason: fmt.Sprintf("the next request needs about %d input tokens and %d of the %d-token budget remain", in, max(left, 0), b.MaxTokens)}
		}
		limit(left - in)
	}
	if b.MaxCostUSD > 0 {
		left := b.MaxCostUSD - r.cost.USD
		if left <= 0 {
			return nil, &Outcome{Kind: CostBudgetExceeded, Budget: BudgetMoney,
				Reason: fmt.Sprintf("the money budget of $%g is spent", b.MaxCostUSD)}
		}
		if pr, ok := p.(provider.Pricer); ok {
			inCost := pr.Price(provider.Usage{InputTokens: in})
			perM := pr.Price(provider.Usage{OutputTokens: 1_000_000})
			if inCost.Known && perM.Known {
				if perM.USD > 0 {
					afford := int64((left - inCost.USD) / perM.USD * 1e6)
					if afford < minOutputTokens {
						return nil, &Outcome{Kind: CostBudgetExceeded, Budget: BudgetMoney,
							Reason: fmt.Sprintf("the next request would cost about $%.6f before any output and $%.6f of the budget remain", inCost.USD, left)}
					}
					limit(afford)
				} else if inCost.USD >= left {
					return nil, &Outcome{Kind: CostBudgetExceeded, Budget: BudgetMoney,
						Reason: fmt.Sprintf("the next request would cost about $%.6f and $%.6f of the budget remain", inCost.USD, left)}
				}
			}
		}
	}
	return &capped, nil
}

// callTool runs one tool call and returns its observation, and the
// approval request it deferred, if it did. Only a store failure is an
// error.
func (r *runner) callTool(ctx context.Context, n int, call provider.ToolCall) (store.Observation, *store.Approval, error) {
	o := store.Observation{Kind: store.ObservationTool, CallID: call.ID, Tool: call.Name, Arguments: call.Arguments}
	r.emit(Event{Kind: EventToolCall, Step: n, Tool: call.Name, CallID: call.ID, Arguments: call.Arguments})
	t, ok := r.tools[call.Name]
	var res tool.Result
	var gate *callGate
	if !ok {
		res = tool.Result{IsError: true, Output: fmt.Sprintf("[error] there is no tool %q; the tools are: %s", call.Name, r.toolNames())}
	} else {
		if !tool.IsIdempotent(t) {
			if _, err := r.st.OpenIntent(context.WithoutCancel(ctx), &store.Intent{RunID: r.runID, Step: n, CallID: call.ID,
				Tool: call.Name, Arguments: call.Arguments, CreatedAt: time.Now()}); err != nil {
				return o, nil, wrap(ErrState, "record intent", err)
			}
		}
		env := r.env
		args := call.Arguments
		if r.policy != nil {
			gate = &callGate{r: r, step: n, call: call}
			env.Gate = gate
		}
		var stop *tool.Result
		if !tool.IsBuiltin(call.Name) && gate != nil {
			// A registered tool is an exec of its name, checked here
			// whatever the tool itself does.
			args, stop = registeredCall(ctx, gate, call)
		}
		if stop != nil {
			res = *stop
		} else {
			res = t.Call(ctx, &env, args)
		}
	}
	o.Output, o.IsError, o.Refusal = res.Output, res.IsError, res.Refusal
	if res.Refusal != "" {
		r.emit(Event{Kind: EventRefusal, Step: n, Tool: call.Name, CallID: call.ID, Reason: res.Refusal, IsError: true})
	}
	r.emit(Event{Kind: EventToolResult, Step: n, Tool: call.Name, CallID: call.ID, IsError: res.IsError,
		Output: clip(res.Output, outputPreview), RequestID: res.Deferred})
	if gate != nil && gate.deferred != nil && res.Deferred == gate.deferred.ID {
		return o, gate.deferred, nil
	}
	return o, nil, nil
}

func (r *runner) toolNames() string {
	names := make([]string, len(r.specs))
	for i, s := range r.specs {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// verify runs every check of the gate and returns the verdict with the
// observation that tells the model. Only a failure of the sandbox itself
// is an error: it says nothing about the agent's work.
func (r *runner) verify(ctx context.Context, n int) (bool, store.Observation, error) {
	env := &verify.Env{Root: r.root, Sandbox: r.sb, Allow: r.allowGateExec, Getenv: os.Getenv}
	results := make([]verify.Result, len(r.task.Verification))
	passed := true
	var b strings.Builder
	for i := range r.task.Verification {
		c := &r.task.Verification[i]
		if c.Executes() && env.CacheDir == "" {
			env.CacheDir = gateCache()
		}
		res, err := verify.Run(ctx, env, c)
		if err != nil {
			return false, store.Observation{}, &Error{Kind: ErrSandbox, Message: fmt.Sprintf("verification %s", c.Kind), Err: err}
		}
		results[i] = res
		if !res.Passed {
			passed = false
			b.WriteString("\n- " + res.Detail)
			if res.Backend != "" {
				fmt.Fprintf(&b, " (sandbox %s, %s)", res.Backend, res.Duration.Round(time.Millisecond))
			}
			if res.Output != "" {
				b.WriteString("\n" + indentBlock(res.Output))
			}
		}
	}
	out := fmt.Sprintf("Verification after step %d: passed.", n)
	if !passed {
		out = fmt.Sprintf("Verification after step %d: not yet passed.%s", n, b.String())
	}
	r.emit(Event{Kind: EventVerification, Step: n, Checks: results, Passed: &passed})
	return passed, store.Observation{Kind: store.ObservationVerification, Output: out, IsError: !passed}, nil
}

// indentBlock indents a block of output under a list item.
func indentBlock(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// inDoubtObservation reports the in-doubt effects to the trace and returns
// the observation that tells the model.
func (r *runner) inDoubtObservation() store.Observation {
	for _, in := range r.inDoubt {
		r.emit(Event{Kind: EventInDoubt, Step: in.Step, Tool: in.Tool, CallID: in.CallID, Arguments: in.Arguments,
			Reason: "started before a crash; its step never committed"})
	}
	return store.Observation{Kind: store.ObservationInDoubt, Output: r.inDoubtText()}
}

// inDoubtText tells the model which effects of a step that never committed
// may or may not have happened.
func (r *runner) inDoubtText() string {
	var b strings.Builder
	b.WriteString("The harness stopped while an earlier attempt at this step was running. These calls had started and may or may not have taken effect; check the workspace before repeating them:")
	for _, in := range r.inDoubt {
		fmt.Fprintf(&b, "\n- %s %s", in.Tool, compactArgs(in.Arguments))
	}
	return b.String()
}

// finish records the outcome and returns the result.
func (r *runner) finish(ctx context.Context, out Outcome, attempts []store.Attempt) (*Result, error) {
	out.Steps = len(r.history)
	out.Usage, out.Cost = r.usage, r.cost
	o := out
	r.emit(Event{Kind: EventOutcome, Step: out.Steps, Outcome: &o})
	data, err := json.Marshal(out)
	if err != nil {
		return nil, wrap(ErrState, "encode outcome", err)
	}
	status := store.StatusFinished
	if out.Kind == AwaitingApproval {
		status = store.StatusPaused
	}
	if err := r.st.FinishRun(context.WithoutCancel(ctx), &store.Finish{RunID: r.runID, Status: status,
		Outcome: string(out.Kind), OutcomeJSON: data, At: time.Now(), Attempts: attempts, Events: r.takePending()}); err != nil {
		return nil, wrap(ErrState, "finish run", err)
	}
	return &Result{RunID: r.runID, Outcome: out, Remembered: r.remembered}, nil
}

func compactArgs(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// clip cuts s to at most n bytes, on a character boundary, with a marker.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isCharStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[... %d more bytes]", len(s)-cut)
}

func isCharStart(b byte) bool { return b&0xC0 != 0x80 }

// registeredCall checks a registered tool's call against the exec policy
// on its name; an approver may rewrite the arguments. It returns the
// arguments to call with, or the result to return instead.
func registeredCall(ctx context.Context, g *callGate, call provider.ToolCall) (json.RawMessage, *tool.Result) {
	v := g.Authorize(ctx, tool.Action{Act: policy.Exec, Target: call.Name, Content: string(call.Arguments)})
	switch {
	case v.Deferred != "":
		return nil, &tool.Result{IsError: true, Deferred: v.Deferred,
			Output: fmt.Sprintf("[awaiting approval] %s: a person must decide (request %s); nothing was done yet", call.Name, v.Deferred)}
	case v.Refused != "":
		return nil, &tool.Result{IsError: true, Refusal: v.Refused, Output: fmt.Sprintf("[refused] exec %s: %s", call.Name, v.Refused)}
	}
	return json.RawMessage(v.Action.Content), nil
}
