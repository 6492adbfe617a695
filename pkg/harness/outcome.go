package harness

import (
	"encoding/json"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// OutcomeKind names how a run ended.
type OutcomeKind string

const (
	// Success: every verification check passed.
	Success OutcomeKind = "success"
	// StepCapReached: the step budget ran out first.
	StepCapReached OutcomeKind = "step_cap_reached"
	// TimeBudgetExceeded: the time budget ran out first.
	TimeBudgetExceeded OutcomeKind = "time_budget_exceeded"
	// CostBudgetExceeded: the token or money budget could not pay for the
	// next request. Outcome.Budget says which.
	CostBudgetExceeded OutcomeKind = "cost_budget_exceeded"
	// Escalated: the provider failed, retries and fallbacks were used up.
	// Outcome.Retryable says whether trying again later could help.
	Escalated OutcomeKind = "escalated"
	// Cancelled: the caller cancelled the run's context.
	Cancelled OutcomeKind = "cancelled"
	// AwaitingApproval: an action waits for a person's decision, deferred
	// past the end of the process. Outcome.RequestID names it; resume
	// with [ResumeWithDecision].
	AwaitingApproval OutcomeKind = "awaiting_approval"
	// Finished: a task with nothing to check (no verification, no output
	// schema) ended on a turn without a tool call; Outcome.Answer is that
	// turn's text.
	Finished OutcomeKind = "finished"
	// VerificationFailed: the steps ran out and the verification never
	// passed; Outcome.Reason ends with what the last check said. Resume
	// with more steps to go on.
	VerificationFailed OutcomeKind = "verification_failed"
	// SchemaUnsatisfied: the model's final answers did not match the
	// task's output schema, as many times as it may try.
	SchemaUnsatisfied OutcomeKind = "schema_unsatisfied"
	// BudgetCeilingReached: the ceiling of the agent's tree (tokens,
	// money or time; Outcome.Budget says which) could not pay for the next
	// request, and the whole tree halted. Every agent of the tree that was
	// still working ends with it.
	BudgetCeilingReached OutcomeKind = "budget_ceiling_reached"
)

// Final reports whether a resume leaves a run with this outcome alone
// unless the caller asks otherwise. The budget outcomes are not final: a
// resume with a larger budget continues the run.
func (k OutcomeKind) Final() bool {
	switch k {
	case Success, Escalated, Cancelled, Finished, SchemaUnsatisfied:
		return true
	}
	return false
}

// Budget names the budget a CostBudgetExceeded outcome ran out of.
type Budget string

const (
	// BudgetTokens is Budgets.MaxTokens.
	BudgetTokens Budget = "tokens"
	// BudgetMoney is Budgets.MaxCostUSD.
	BudgetMoney Budget = "money"
	// BudgetTime is a tree's Containment.Time.
	BudgetTime Budget = "time"
)

// Outcome is how a run ended, with what it spent.
type Outcome struct {
	Kind OutcomeKind `json:"kind"`
	// Steps is the number of steps completed, not attempted.
	Steps int `json:"steps"`
	// Usage is the run's token total.
	Usage provider.Usage `json:"usage"`
	// Cost is the run's money total; Known is false when some provider
	// could not price a turn.
	Cost provider.Cost `json:"cost"`
	// Lost is what provider calls cost whose steps never committed — a
	// crash between an answer and its commit. It is paid for, counted in
	// every budget, and part of no step; Usage and Cost do not include it.
	Lost *Spent `json:"lost,omitempty"`
	// Budget is the budget a CostBudgetExceeded run ran out of, or the
	// ceiling a BudgetCeilingReached tree reached.
	Budget Budget `json:"budget,omitempty"`
	// Retryable says whether an Escalated run could succeed if tried
	// again later (the last failure was transient).
	Retryable bool `json:"retryable,omitempty"`
	// Reason says, in words, why the run ended.
	Reason string `json:"reason,omitempty"`
	// RequestID names the approval request an AwaitingApproval run waits
	// on.
	RequestID string `json:"request_id,omitempty"`
	// Answer is the model's final answer: the text of its last turn, when
	// the run ended on one (Finished, or a Success with an output schema).
	Answer string `json:"answer,omitempty"`
	// Output is the final answer validated against the task's output
	// schema, as JSON.
	Output json.RawMessage `json:"output,omitempty"`
}

// Spent is an amount of tokens and money.
type Spent struct {
	Usage provider.Usage `json:"usage"`
	Cost  provider.Cost  `json:"cost"`
}

// Result is what Run and Resume return.
type Result struct {
	// RunID names the run in the store.
	RunID string `json:"run_id"`
	// Outcome is how the run ended.
	Outcome Outcome `json:"outcome"`
	// Remembered are the rules approvers asked the run to remember, for
	// the caller to persist if it wants them beyond the run.
	Remembered []policy.Rule `json:"remembered,omitempty"`
}
