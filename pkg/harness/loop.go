package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/tree"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// minOutputTokens is the smallest output cap worth paying for: fewer
// tokens cannot hold a tool call, so a request that could ask for no more
// is not sent and the run ends on its budget instead.
const minOutputTokens = 32

// loop drives the run from step next until an outcome.
func (r *runner) loop(ctx context.Context, next int) (*Result, error) {
	r.setDeadline()
	for n := next; ; n++ {
		switch {
		case n > r.task.maxSteps():
			return r.finish(ctx, r.stepsOutcome(), nil)
		case ctx.Err() != nil:
			return r.finish(ctx, Outcome{Kind: Cancelled, Reason: cancelReason(ctx)}, nil)
		case r.timeUp():
			return r.finish(ctx, r.timeOutcome(), nil)
		case r.tree != nil && r.tree.ledger.Halted() != "":
			return r.finish(ctx, r.tree.haltOutcome(), nil)
		}
		res, out, attempts, err := r.step(ctx, n)
		switch {
		case err != nil:
			return nil, err
		case res != nil:
			return res, nil
		case out != nil:
			return r.finish(ctx, *out, attempts)
		}
	}
}

// maxAnswers is how many final answers that do not match the output
// schema a run takes before it ends schema_unsatisfied.
const maxAnswers = 3

// judgeAnswer checks a final answer against the output schema: the
// observation that tells the model, and the validated JSON when it
// matches. A JSON value wrapped in a Markdown code fence counts.
func (r *runner) judgeAnswer(text string) (store.Observation, json.RawMessage) {
	doc := []byte(strings.TrimSpace(unfence(text)))
	if err := r.schema.Check(doc); err != nil {
		left := maxAnswers - r.badAnswers() - 1
		return store.Observation{Kind: store.ObservationAnswer, IsError: true,
			Output: fmt.Sprintf("Your final answer does not match the output schema: %v. Answer again, without a tool call, with only JSON that matches it (%d more tries).", err, max(left, 0))}, nil
	}
	var b bytes.Buffer
	json.Compact(&b, doc)
	return store.Observation{Kind: store.ObservationAnswer, Output: "Your final answer matches the output schema."}, b.Bytes()
}

// badAnswers counts the committed answers that did not match the output
// schema.
func (r *runner) badAnswers() int {
	n := 0
	for i := range r.history {
		for _, o := range r.history[i].Observations {
			if o.Kind == store.ObservationAnswer && o.IsError {
				n++
			}
		}
	}
	return n
}

// unfence returns the body of a text that is one Markdown code block.
func unfence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return s
	}
	t = strings.TrimSuffix(t[3:], "```")
	if i := strings.IndexByte(t, '\n'); i >= 0 && !strings.ContainsAny(t[:i], "{[\"") {
		t = t[i+1:]
	}
	return t
}

// setDeadline sets the end of the time budget: the run's start, plus the
// budget, plus the time the run spent paused for a person.
func (r *runner) setDeadline() {
	if t := time.Duration(r.task.Budgets.Time); t > 0 {
		r.deadline = r.startedAt.Add(t + r.paused)
	}
	if r.tree != nil {
		if d := r.tree.deadline(); !d.IsZero() && (r.deadline.IsZero() || d.Before(r.deadline)) {
			r.deadline, r.treeDeadline = d, true
		}
	}
}

// stepsOutcome is how a run ends when its steps are used up: it failed
// its verification, when it has one, else it reached the step cap.
func (r *runner) stepsOutcome() Outcome {
	cap := fmt.Sprintf("the step budget of %d is used up", r.task.maxSteps())
	if len(r.verifiers) == 0 {
		return Outcome{Kind: StepCapReached, Reason: cap}
	}
	last := "no step ran"
	for i := len(r.history) - 1; i >= 0 && last == "no step ran"; i-- {
		for _, o := range r.history[i].Observations {
			if o.Kind == store.ObservationVerification {
				last = o.Output
			}
		}
	}
	return Outcome{Kind: VerificationFailed, Reason: cap + " and the verification never passed; the last check said: " + clip(last, 2000)}
}

func (r *runner) timeUp() bool { return !r.deadline.IsZero() && !time.Now().Before(r.deadline) }

func (r *runner) timeOutcome() Outcome {
	if r.treeDeadline {
		return r.tree.halt(BudgetTime, fmt.Sprintf("the tree's time ceiling of %s is used up (containment.time)", time.Duration(r.tree.cont.Time)))
	}
	return Outcome{Kind: TimeBudgetExceeded,
		Reason: fmt.Sprintf("the time budget of %s is used up", time.Duration(r.task.Budgets.Time))}
}

// step runs step n: one model turn, its tool calls, the verification gate,
// and one commit. A step that ends the run commits its outcome with it and
// returns the result; an outcome reached before the step could commit is
// returned with the provider attempts of the step, for finish.
func (r *runner) step(ctx context.Context, n int) (*Result, *Outcome, []store.Attempt, error) {
	started := time.Now()
	r.cur = n
	sctx, cancel := r.stepContext(ctx)
	defer cancel()

	// What the model must be told before its turn: calls in doubt after a
	// crash, and what came of decisions on requests that waited for a
	// person (carried out before the step began).
	r.emit(Event{Kind: EventStepStarted, Step: n})
	r.refreshMCP(sctx)
	var pre []store.Observation
	var reported []int64
	if len(r.inDoubt) > 0 {
		pre = append(pre, r.inDoubtObservation())
		for _, in := range r.inDoubt {
			reported = append(reported, in.ID)
		}
	}
	r.pre = append(pre, r.pre...)

	req, err := r.request(sctx, n, r.contextLimit())
	if err != nil {
		return nil, nil, nil, err
	}
	resp, prov, attempts, out := r.complete(ctx, sctx, n, req)
	if out != nil && overflowed(attempts) {
		// The provider says the context is too long: fold what can be
		// folded, and ask once more if that made the request shorter. A
		// request the fold left as it was would only be refused again.
		was := provider.EstimateInput(&provider.Request{Messages: req.Messages})
		again, err := r.request(sctx, n, was/2)
		if err != nil {
			return nil, nil, nil, err
		}
		if provider.EstimateInput(&provider.Request{Messages: again.Messages}) < was || r.opts.retryUnchanged {
			var more []store.Attempt
			resp, prov, more, out = r.complete(ctx, sctx, n, again)
			attempts = append(attempts, more...)
		} else {
			out.Reason += "; folding the history did not make the request shorter, so it was not sent again"
		}
	}
	if out != nil {
		return nil, out, attempts, nil
	}
	// The call is paid for: its spend is on record before anything else
	// can fail, so that a crash from here on loses nothing of the accounts.
	if err := r.recordSpend(ctx, &store.Spend{RunID: r.runID, Step: n, Attempt: len(attempts),
		Provider: prov, Usage: resp.Usage, Cost: resp.Cost, At: time.Now()}); err != nil {
		return nil, nil, nil, storeError(fmt.Sprintf("record the spend of step %d", n), err)
	}
	cost := resp.Cost
	r.emit(Event{Kind: EventModelDone, Step: n, Provider: prov, Text: resp.Text, Usage: &resp.Usage, Cost: &cost,
		LatencyMS: attempts[len(attempts)-1].Latency.Milliseconds(), FirstTokenMS: r.firstToken.Milliseconds(),
		Model: resp.Model, StopReason: resp.StopReason})

	obs := append([]store.Observation(nil), r.pre...)
	r.badArgs = wrapInvalidArguments(resp.ToolCalls)
	assistant := provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls}
	var deferred []store.Approval
	calls := resp.ToolCalls
	for len(calls) > 0 {
		if len(deferred) > 0 {
			// Nothing after a call that waits for a person runs: the
			// person decides with the workspace as it was.
			call := calls[0]
			calls = calls[1:]
			obs = append(obs, store.Observation{Kind: store.ObservationTool, CallID: call.ID, Tool: call.Name, Arguments: call.Arguments,
				IsError: true, Output: "[not run] an earlier call of this turn waits for a person's decision; call it again afterwards if it is still needed"})
			continue
		}
		if why, bad := r.badArgs[calls[0].ID]; bad {
			call := calls[0]
			calls = calls[1:]
			r.emit(Event{Kind: EventToolCall, Step: n, Tool: call.Name, CallID: call.ID, Arguments: call.Arguments})
			out := "[error] the arguments are not valid JSON (" + why + "); call " + call.Name + " again with a JSON object"
			r.emit(Event{Kind: EventToolResult, Step: n, Tool: call.Name, CallID: call.ID, IsError: true, Output: out})
			obs = append(obs, store.Observation{Kind: store.ObservationTool, CallID: call.ID, Tool: call.Name, Arguments: call.Arguments,
				IsError: true, Output: out})
			continue
		}
		if k := r.spawnRun(calls); k > 0 {
			o, err := r.spawnAll(sctx, n, calls[:k])
			if err != nil {
				return nil, nil, nil, err
			}
			obs = append(obs, o...)
			calls = calls[k:]
			continue
		}
		if k := r.readOnlyRun(calls); k > 1 {
			obs = append(obs, r.callReads(sctx, n, calls[:k])...)
			calls = calls[k:]
			continue
		}
		o, d, err := r.callTool(sctx, n, calls[0], r.emit)
		if err != nil {
			return nil, nil, nil, err
		}
		calls = calls[1:]
		obs = append(obs, o)
		if d != nil {
			deferred = append(deferred, *d)
		}
	}
	// A turn without a tool call is the model's answer, or a turn wasted.
	answered, valid := false, false
	var output json.RawMessage
	if len(resp.ToolCalls) == 0 {
		switch {
		case r.schema != nil:
			o, doc := r.judgeAnswer(resp.Text)
			obs = append(obs, o)
			answered, valid, output = true, doc != nil, doc
		case len(r.verifiers) == 0:
			answered, valid = true, true
		default:
			if note := turnNote(resp); note != "" {
				obs = append(obs, store.Observation{Kind: store.ObservationNote, Output: note})
			}
		}
	} else if len(resp.DroppedCalls) > 0 {
		// Some calls ran, and the turn was cut inside another.
		obs = append(obs, store.Observation{Kind: store.ObservationNote, Output: turnNote(resp)})
	}
	passed := len(r.verifiers) == 0
	blocked := r.blocked
	r.blocked = nil
	if len(deferred) == 0 && blocked == nil && len(r.verifiers) > 0 {
		var vobs store.Observation
		var err error
		if passed, vobs, err = r.verify(sctx, n); err != nil {
			return nil, nil, nil, err
		}
		if passed && r.schema != nil && !valid {
			vobs.Output += "\nEvery check passes. Now give your final answer: a turn without a tool call, with only JSON that matches the task's output schema."
		}
		obs = append(obs, vobs)
	}
	r.emit(Event{Kind: EventCheckpoint, Step: n})

	// The step's spend is its turn's and its folds'.
	usage := resp.Usage
	if r.foldUsage != (provider.Usage{}) {
		usage, cost = usage.Add(r.foldUsage), cost.Add(r.foldCost)
		r.foldUsage, r.foldCost = provider.Usage{}, provider.Cost{}
	}
	commit := &store.Commit{
		Step: store.Step{RunID: r.runID, Step: n, StartedAt: started, FinishedAt: time.Now(), Provider: prov,
			Assistant: assistant, Observations: obs, Usage: usage, Cost: cost, Verified: passed, Attempts: attempts},
		InDoubt:   reported,
		Approvals: deferred,
		Applied:   r.applied,
	}
	if r.rememberedDirty {
		var err error
		if commit.Remembered, err = json.Marshal(r.remembered); err != nil {
			return nil, nil, nil, wrap(ErrState, "encode remembered rules", err)
		}
	}
	r.history = append(r.history, commit.Step)
	r.mgr.Append(&r.history[len(r.history)-1])
	r.committed()
	r.inDoubt, r.pre, r.applied, r.rememberedDirty = nil, nil, nil, false
	r.usage = r.usage.Add(usage)
	r.cost = r.cost.Add(cost)
	// A step that ends the run commits its outcome with it: no crash can
	// leave the last step committed and the run without its outcome.
	var end *Outcome
	switch {
	case blocked != nil && len(deferred) == 0:
		end = blocked
	case len(deferred) > 0:
		d := deferred[0]
		end = &Outcome{Kind: AwaitingApproval, RequestID: d.ID,
			Reason: fmt.Sprintf("%s %s waits for a person's decision (request %s)", d.Act, d.Target, d.ID)}
	case r.schema == nil && len(r.verifiers) == 0 && answered:
		end = &Outcome{Kind: Finished, Answer: resp.Text, Reason: "the model answered; the task has nothing to check"}
	case r.schema != nil && valid && passed:
		reason := "the final answer matches the output schema"
		if len(r.verifiers) > 0 {
			reason += " and every verification check passed"
		}
		end = &Outcome{Kind: Success, Answer: resp.Text, Output: output, Reason: reason}
	case r.schema != nil && answered && !valid && r.badAnswers() >= maxAnswers:
		end = &Outcome{Kind: SchemaUnsatisfied, Answer: resp.Text,
			Reason: fmt.Sprintf("%d answers did not match the output schema; the last: %s", maxAnswers, obs[len(obs)-1].Output)}
	case r.schema == nil && len(r.verifiers) > 0 && passed:
		end = &Outcome{Kind: Success, Reason: "every verification check passed"}
	}
	var res *Result
	if end != nil {
		var err error
		if commit.Finish, res, err = r.outcome(*end, nil); err != nil {
			return nil, nil, nil, err
		}
	}
	commit.Events = r.takePendingOf(&commit.Step)
	// A step whose effects happened is recorded even if the caller has
	// just cancelled: the commit does not take the run's cancellation.
	if err := r.st.CommitStep(context.WithoutCancel(ctx), r.lease, commit); err != nil {
		return nil, nil, nil, storeError(fmt.Sprintf("commit step %d", n), err)
	}
	return res, nil, nil, nil
}

// recordSpend records a provider call's spend at once, so that a crash
// before the step commits loses nothing of the accounts. A store that is
// not durable loses everything with the process anyway: the step's commit
// records the spend.
func (r *runner) recordSpend(ctx context.Context, sp *store.Spend) error {
	if !r.st.Durable() {
		return nil
	}
	return r.st.RecordSpend(context.WithoutCancel(ctx), r.lease, sp)
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
	var t0 time.Time
	onText := func(s string) {
		if r.firstToken == 0 {
			r.firstToken = max(time.Since(t0), time.Millisecond)
		}
		r.emit(Event{Kind: EventModelDelta, Step: n, Text: s})
	}
	for pi := r.active; pi < len(r.providers); pi++ {
		p := r.providers[pi]
		if pi != r.active {
			r.emit(Event{Kind: EventFallback, Step: n, Provider: p.Name(), ErrorKind: last.Kind,
				Reason: "falling back after " + last.Error()})
		}
		for try := 0; try <= retries; try++ {
			preq, draw, out := r.capRequest(sctx, p, req)
			if out != nil {
				return nil, "", attempts, out
			}
			preq = imagesFor(p, preq)
			t0, r.firstToken = time.Now(), 0
			resp, err := p.Complete(sctx, preq, onText)
			a := store.Attempt{Step: n, Attempt: len(attempts) + 1, Provider: p.Name(), Latency: time.Since(t0), At: t0}
			if resp != nil && err == nil {
				r.meter.read(p, preq, resp.Usage)
				r.settle(draw, n, resp.Usage, resp.Cost)
			} else {
				r.settle(draw, n, provider.Usage{}, provider.Cost{})
			}
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
				return nil, "", attempts, &Outcome{Kind: Cancelled, Reason: cancelReason(ctx)}
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
			if ceiling := r.maxWait(); pe.RetryAfter > ceiling {
				// Sleeping an hour on a provider's word is not a retry:
				// the run ends, and says when it could be tried again.
				note = fmt.Sprintf("; the provider asked to wait %s before trying again, over the %s ceiling (backoff.max)",
					pe.RetryAfter.Round(time.Second), ceiling)
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
				return nil, "", attempts, &Outcome{Kind: Cancelled, Reason: cancelReason(ctx)}
			}
		}
	}
	return nil, "", attempts, &Outcome{Kind: Escalated, Retryable: last.Transient(),
		Reason: fmt.Sprintf("every provider failed; the last failure: %s%s", last.Error(), note)}
}

// maxWait is the longest wait before a retry: Backoff.Max, 30s unless set.
func (r *runner) maxWait() time.Duration {
	if m := time.Duration(r.opts.Backoff.Max); m > 0 {
		return m
	}
	return 30 * time.Second
}

// backoff is the wait before retry number try+1.
func (r *runner) backoff(try int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	base, max := time.Duration(r.opts.Backoff.Base), r.maxWait()
	if base == 0 {
		base = 500 * time.Millisecond
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
// budget is not sent. In a tree the request is also drawn from the tree's
// ledger; the draw is settled with what the call cost (see settle).
func (r *runner) capRequest(ctx context.Context, p provider.Provider, req *provider.Request) (*provider.Request, *tree.Draw, *Outcome) {
	b := &r.task.Budgets
	var ceiling tree.Amount
	if r.tree != nil {
		ceiling = r.tree.ledger.Ceiling()
	}
	if b.MaxTokens == 0 && b.MaxCostUSD == 0 && ceiling == (tree.Amount{}) {
		return req, r.draw(ctx, nil), nil
	}
	var in int64
	if tc, ok := p.(provider.TokenCounter); ok {
		in = tc.CountInput(req)
	} else {
		in = r.meter.bound(p, req)
		if r.opts.estimateOnly {
			in = provider.EstimateInput(req)
		}
	}
	capped := *req
	limit := func(n int64) {
		if capped.MaxOutputTokens == 0 || n < capped.MaxOutputTokens {
			capped.MaxOutputTokens = n
		}
	}
	// A request the tree's ceiling cannot pay halts the whole tree, even
	// when the agent's own budget (cut to what the tree had left when it
	// was spawned) would stop it too: the tree's is the fact that matters.
	if ceiling.Tokens > 0 && r.tree.ledger.Left().Tokens-in < minOutputTokens {
		r.tree.halt(BudgetTokens, fmt.Sprintf("the next request of agent %s needs about %d input tokens and %d of the tree's %d tokens remain",
			r.path, in, max(r.tree.ledger.Left().Tokens, 0), ceiling.Tokens))
		out := r.tree.haltOutcome()
		return nil, nil, &out
	}
	if b.MaxTokens > 0 {
		left := b.MaxTokens - r.usage.Total() - r.lost.Usage.Total() - r.foldUsage.Total()
		if left-in < minOutputTokens {
			return nil, nil, &Outcome{Kind: CostBudgetExceeded, Budget: BudgetTokens,
				Reason: fmt.Sprintf("the next request needs about %d input tokens and %d of the %d-token budget remain", in, max(left, 0), b.MaxTokens)}
		}
		limit(left - in)
	}
	// inCost and outCost are the request's price before any output and
	// per output token, when p knows them.
	var inCost, outCost float64
	priced := false
	if pr, ok := p.(provider.Pricer); ok {
		ic := pr.Price(provider.Usage{InputTokens: in})
		// The output's price after this input: long-context models
		// charge more per token past a prompt threshold.
		perM := pr.Price(provider.Usage{InputTokens: in, OutputTokens: 1_000_000})
		if ic.Known && perM.Known {
			inCost, outCost, priced = ic.USD, (perM.USD-ic.USD)/1e6, true
		}
	}
	if ceiling.USD > 0 && priced && r.tree.ledger.Left().USD-inCost-float64(minOutputTokens)*outCost <= 0 {
		r.tree.halt(BudgetMoney, fmt.Sprintf("the next request of agent %s would cost about $%.6f and $%.6f of the tree's $%g remain",
			r.path, inCost, max(r.tree.ledger.Left().USD, 0), ceiling.USD))
		out := r.tree.haltOutcome()
		return nil, nil, &out
	}
	if b.MaxCostUSD > 0 {
		left := b.MaxCostUSD - r.cost.USD - r.lost.Cost.USD - r.foldCost.USD
		if left <= 0 {
			return nil, nil, &Outcome{Kind: CostBudgetExceeded, Budget: BudgetMoney,
				Reason: fmt.Sprintf("the money budget of $%g is spent", b.MaxCostUSD)}
		}
		if priced {
			if outCost > 0 {
				afford := int64((left - inCost) / outCost)
				if afford < minOutputTokens {
					return nil, nil, &Outcome{Kind: CostBudgetExceeded, Budget: BudgetMoney,
						Reason: fmt.Sprintf("the next request would cost about $%.6f before any output and $%.6f of the budget remain", inCost, left)}
				}
				limit(afford)
			} else if inCost >= left {
				return nil, nil, &Outcome{Kind: CostBudgetExceeded, Budget: BudgetMoney,
					Reason: fmt.Sprintf("the next request would cost about $%.6f and $%.6f of the budget remain", inCost, left)}
			}
		}
	}
	if ceiling == (tree.Amount{}) {
		return &capped, r.draw(ctx, nil), nil
	}
	// The tree's ceiling: the request is drawn from the ledger with the
	// most output it may produce, and asks for no more than was drawn.
	want := capped.MaxOutputTokens
	if want == 0 {
		want = drawOutput
		if l, ok := provider.LimitsOf(p); ok && l.MaxOutputTokens > 0 {
			want = l.MaxOutputTokens
		}
	}
	var got int64
	d := r.draw(ctx, func(avail tree.Amount) (tree.Amount, bool) {
		o := min(want, avail.Tokens-in)
		if ceiling.USD > 0 && priced {
			if outCost > 0 {
				o = min(o, int64((avail.USD-inCost)/outCost))
			} else if inCost > avail.USD {
				return tree.Amount{}, false
			}
		}
		if o < minOutputTokens {
			return tree.Amount{}, false
		}
		got = o
		return tree.Amount{Tokens: in + o, USD: inCost + float64(o)*outCost}, true
	})
	if d == nil {
		if ctx.Err() != nil {
			return nil, nil, &Outcome{Kind: Cancelled, Reason: cancelReason(ctx)}
		}
		out := r.tree.haltOutcome()
		return nil, nil, &out
	}
	limit(got)
	return &capped, d, nil
}

// drawOutput is the output a request draws from a tree's ceiling when
// neither the budgets nor the model's catalogue entry bound it.
const drawOutput = 8192

// draw reserves a request's spend on the tree's ledger: what plan decides,
// or nothing for a request whose tree has no ceiling (nil plan). It
// returns nil outside a tree, and when the ledger refuses (the tree
// halted) or ctx ended.
func (r *runner) draw(ctx context.Context, plan tree.Plan) *tree.Draw {
	if r.tree == nil {
		return nil
	}
	if plan == nil {
		plan = func(tree.Amount) (tree.Amount, bool) { return tree.Amount{}, true }
	}
	d, err := r.tree.ledger.Reserve(ctx, plan)
	if errors.Is(err, tree.ErrCeiling) {
		r.tree.halt(r.tree.ceilingBudget(), "")
	}
	if err != nil {
		return nil
	}
	return d
}

// settle ends a draw with what its call cost, and traces the draw.
func (r *runner) settle(d *tree.Draw, n int, u provider.Usage, c provider.Cost) {
	if d == nil {
		return
	}
	amt := tree.Amount{Tokens: u.Total(), USD: c.USD}
	d.Settle(amt)
	if amt == (tree.Amount{}) {
		return
	}
	r.emit(Event{Kind: EventLedger, Step: n, Ledger: &LedgerEvent{Drawn: amt, Spent: r.tree.ledger.Spent(), Ceiling: r.tree.ledger.Ceiling()}})
}

// overflowed reports whether a step's provider calls ended on a context
// that was too long.
func overflowed(attempts []store.Attempt) bool {
	return len(attempts) > 0 && attempts[len(attempts)-1].ErrorKind == string(provider.KindContextOverflow)
}

// maxParallelReads bounds the read-only calls of a turn that run at once.
const maxParallelReads = 8

// readOnlyRun returns how many calls at the head of calls may run
// concurrently: built-in or registered tools that declare themselves
// read-only, while no read can ask a person (an approver is asked one
// thing at a time).
func (r *runner) readOnlyRun(calls []provider.ToolCall) int {
	if r.policy != nil && r.policy.Asks(policy.Read) {
		return 0
	}
	k := 0
	for _, c := range calls {
		t, ok := r.tools[c.Name]
		if !ok || r.badArgs[c.ID] != "" || !tool.IsReadOnly(t) || !tool.IsBuiltin(c.Name) && r.policy != nil && r.policy.Asks(policy.Exec) {
			break
		}
		k++
	}
	return k
}

// wrapInvalidArguments replaces, in place, the arguments of each call that
// are not valid JSON (a model that wrote a broken object) by an object
// that holds them as text, {"invalid_json": "..."}: the turn can then be
// stored and sent back to every vendor as it was, and the call is not run.
// It returns why each such call's arguments did not parse, by call id.
func wrapInvalidArguments(calls []provider.ToolCall) map[string]string {
	var bad map[string]string
	for i := range calls {
		c := &calls[i]
		if json.Valid(c.Arguments) {
			continue
		}
		var v any
		err := json.Unmarshal(c.Arguments, &v)
		if err == nil { // not reached: Valid and Unmarshal agree
			continue
		}
		if bad == nil {
			bad = map[string]string{}
		}
		bad[c.ID] = err.Error()
		wrapped, _ := json.Marshal(map[string]string{"invalid_json": string(c.Arguments)}) // a string always encodes
		c.Arguments = wrapped
	}
	return bad
}

// spawnRun returns how many spawn_agent calls begin calls, in a tree.
func (r *runner) spawnRun(calls []provider.ToolCall) int {
	if r.tree == nil {
		return 0
	}
	k := 0
	for k < len(calls) && calls[k].Name == tree.SpawnTool && r.badArgs[calls[k].ID] == "" {
		k++
	}
	return k
}

// callReads runs read-only calls concurrently, at most maxParallelReads
// at once, and returns their observations in the order the model made
// the calls. Each call's events are kept and emitted, in that order too,
// once all are done, so the trace reads as if they ran one by one.
func (r *runner) callReads(ctx context.Context, n int, calls []provider.ToolCall) []store.Observation {
	obs := make([]store.Observation, len(calls))
	evs := make([][]Event, len(calls))
	sem := make(chan struct{}, maxParallelReads)
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			// A read-only call opens no intent and asks nobody, so it
			// cannot fail with an error of the run.
			obs[i], _, _ = r.callTool(ctx, n, call, func(e Event) {
				e.At = time.Now() // when it happened, not when it is emitted
				evs[i] = append(evs[i], e)
			})
		})
	}
	wg.Wait()
	for _, es := range evs {
		for _, e := range es {
			r.emit(e)
		}
	}
	return obs
}

// callTool runs one tool call and returns its observation, and the
// approval request it deferred, if it did. Its events go to emit. Only a
// store failure is an error.
func (r *runner) callTool(ctx context.Context, n int, call provider.ToolCall, emit func(Event)) (store.Observation, *store.Approval, error) {
	o := store.Observation{Kind: store.ObservationTool, CallID: call.ID, Tool: call.Name, Arguments: call.Arguments}
	emit(Event{Kind: EventToolCall, Step: n, Tool: call.Name, CallID: call.ID, Arguments: call.Arguments})
	t, ok := r.tools[call.Name]
	var res tool.Result
	var gate *callGate
	switch {
	case r.tree != nil && tree.IsTool(call.Name):
		var err error
		if res, err = r.treeCall(ctx, n, call, emit); err != nil {
			return o, nil, err
		}
	case !ok:
		res = tool.Result{IsError: true, Output: fmt.Sprintf("[error] there is no tool %q; the tools are: %s", call.Name, r.toolNames())}
	default:
		if !tool.IsIdempotent(t) {
			if _, err := r.st.OpenIntent(context.WithoutCancel(ctx), r.lease, &store.Intent{RunID: r.runID, Step: n, CallID: call.ID,
				Tool: call.Name, Arguments: call.Arguments, CreatedAt: time.Now()}); err != nil {
				return o, nil, storeError("record intent", err)
			}
		}
		env := r.env
		args := call.Arguments
		if r.policy != nil {
			gate = &callGate{r: r, step: n, call: call, emit: emit}
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
	r.keepImages(n, call, &res, emit)
	o.Output, o.IsError, o.Refusal, o.Changed = res.Output, res.IsError, res.Refusal, res.Changed
	for _, v := range res.Verdicts {
		emit(verdictEvent(n, v))
	}
	if res.Refusal != "" {
		emit(Event{Kind: EventRefusal, Step: n, Tool: call.Name, CallID: call.ID, Reason: res.Refusal, IsError: true})
	}
	emit(Event{Kind: EventToolResult, Step: n, Tool: call.Name, CallID: call.ID, IsError: res.IsError,
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
	env := &verify.Env{Root: r.root, Sandbox: r.sb, Allow: r.allowGateExec, Getenv: os.Getenv, Names: r.env.Names, Shadow: r.gateShadow}
	if r.policy != nil {
		// The gate's copy holds what the read policy shows a walk; what
		// it hides is traced once per gate.
		g := &callGate{r: r, step: n}
		env.Visible = func(rel string) bool {
			v := g.Peek(policy.Read, rel)
			if v.Effect != policy.Allow {
				r.emitVerdict(n, v)
			}
			return v.Effect == policy.Allow
		}
	}
	results := make([]verify.Result, len(r.verifiers))
	passed := true
	var b strings.Builder
	env.CacheDir = r.gateCache()
	for i, v := range r.verifiers {
		res, err := v.Verify(ctx, env)
		if err != nil && ctx.Err() != nil {
			// Cut short by the time budget or a cancellation: a failed
			// check, so that the step commits and the run then ends
			// with the outcome that cut it.
			res, err = verify.Result{Detail: fmt.Sprintf("%s was cut short: %v", v.Describe(), context.Cause(ctx))}, nil
		}
		if err != nil {
			return false, store.Observation{}, &Error{Kind: ErrSandbox, Message: "verification: " + v.Describe(), Err: err}
		}
		results[i] = res
		if !res.Passed {
			passed = false
			b.WriteString("\n- " + res.Detail)
			if res.Backend != "" {
				fmt.Fprintf(&b, " (sandbox %s, %s, %s)", res.Backend, res.Workspace, res.Duration.Round(time.Millisecond))
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
	f, res, err := r.outcome(out, attempts)
	if err != nil {
		return nil, err
	}
	f.Events = r.takePending()
	if err := r.st.FinishRun(context.WithoutCancel(ctx), r.lease, f); err != nil {
		return nil, storeError("finish run", err)
	}
	return res, nil
}

// outcome completes out with what the run did and spent, emits it, and
// returns the record that stores it and the result that reports it. The
// caller adds the pending events to the record.
func (r *runner) outcome(out Outcome, attempts []store.Attempt) (*store.Finish, *Result, error) {
	out.Steps = len(r.history)
	out.Usage, out.Cost = r.usage, r.cost
	if r.lost != (Spent{}) {
		lost := r.lost
		out.Lost = &lost
	}
	o := out
	r.emit(Event{Kind: EventOutcome, Step: out.Steps, Outcome: &o})
	data, err := json.Marshal(out)
	if err != nil {
		return nil, nil, wrap(ErrState, "encode outcome", err)
	}
	status := store.StatusFinished
	if out.Kind == AwaitingApproval {
		status = store.StatusPaused
	}
	f := &store.Finish{RunID: r.runID, Status: status, Outcome: string(out.Kind), OutcomeJSON: data, At: time.Now(), Attempts: attempts}
	return f, &Result{RunID: r.runID, Outcome: out, Remembered: r.remembered}, nil
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

// cancelReason is a cancelled run's Outcome.Reason: the cause the caller
// gave its context, or, for none, who cancelled the run, in words rather
// than Go's "context canceled".
func cancelReason(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case cause == nil:
		return "cancelled"
	case cause == context.DeadlineExceeded:
		return "the caller's deadline passed"
	case cause == context.Canceled:
		return "cancelled by the caller"
	default:
		return cause.Error()
	}
}

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
