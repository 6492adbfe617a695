package harness

import (
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
)

// Final reports whether a resume leaves a run with this outcome alone
// unless the caller asks otherwise. The budget outcomes are not final: a
// resume with a larger budget continues the run.
func (k OutcomeKind) Final() bool {
	switch k {
	case Success, Escalated, Cancelled:
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
	// Budget is the budget a CostBudgetExceeded run ran out of.
	Budget Budget `json:"budget,omitempty"`
	// Retryable says whether an Escalated run could succeed if tried
	// again later (the last failure was transient).
	Retryable bool `json:"retryable,omitempty"`
	// Reason says, in words, why the run ended.
	Reason string `json:"reason,omitempty"`
	// RequestID names the approval request an AwaitingApproval run waits
	// on.
	RequestID string `json:"request_id,omitempty"`
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
