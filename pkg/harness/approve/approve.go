// Package approve is the human-approval gate: the [Approver] interface the
// harness asks when the policy says ask, the [Decision] it answers with,
// and the built-in approvers.
//
// Only an ask reaches an approver; a deny never does. An approver may
// approve (optionally rewriting the action and giving rules to remember
// for the rest of the run), deny with a reason, or defer: then the run
// persists the action exactly as shown, ends awaiting_approval, and a later
// process resumes it with the decision.
package approve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

// Request is an action waiting for a decision.
type Request struct {
	// ID names the request; a deferred decision answers it by this id.
	ID     string `json:"id"`
	RunID  string `json:"run_id"`
	Step   int    `json:"step"`
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	// Act and Target are what the policy evaluated.
	Act    policy.Act `json:"act"`
	Target string     `json:"target"`
	// Content is the action's payload: the complete new content of a
	// write.
	Content string `json:"content,omitempty"`
	// Shown is what a person is shown: for a write, a unified diff of the
	// change.
	Shown string `json:"shown,omitempty"`
	// Hash identifies exactly this action: see [Hash].
	Hash string `json:"hash"`
	// Rule and Layer are the ask rule that sent the action here; both are
	// empty when the act's default asked.
	Rule  string `json:"rule,omitempty"`
	Layer string `json:"layer,omitempty"`
}

// Hash returns the identity of an action: the hex SHA-256 of its act,
// target and content. A deferred approval performs only the action with
// the hash the person saw.
func Hash(act policy.Act, target, content string) string {
	b, _ := json.Marshal([]string{string(act), target, content})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Kind is an approver's answer.
type Kind string

const (
	// Approve lets the action happen, possibly rewritten.
	Approve Kind = "approve"
	// Deny refuses it; the model is told Reason.
	Deny Kind = "deny"
	// Defer ends the run awaiting a decision from outside the process.
	Defer Kind = "defer"
)

// Decision is an approver's answer to a [Request].
type Decision struct {
	Kind Kind `json:"kind"`
	// Rewrite, with Approve, replaces the action: another target, other
	// content, or both. The rewritten action is checked against the
	// policy again, and no approval crosses a deny.
	Rewrite *Rewrite `json:"rewrite,omitempty"`
	// Remember, with Approve, adds rules to a layer named "remembered"
	// for the rest of the run. A remembered rule never crosses a deny,
	// and a remembered allow does not silence an ask rule, only an ask
	// default.
	Remember []policy.Rule `json:"remember,omitempty"`
	// Reason, with Deny, is what the model is told.
	Reason string `json:"reason,omitempty"`
}

// Rewrite is an approver's change to an action.
type Rewrite struct {
	// Target, when not empty, replaces the target.
	Target string `json:"target,omitempty"`
	// Content, when not nil, replaces the content.
	Content *string `json:"content,omitempty"`
}

// Validate checks a decision: a known kind, rewrites and remembered rules
// only with Approve, and valid rules.
func (d *Decision) Validate() error {
	switch d.Kind {
	case Approve:
		for i := range d.Remember {
			if err := d.Remember[i].Validate(); err != nil {
				return fmt.Errorf("approve: remember[%d]: %w", i, err)
			}
		}
	case Deny, Defer:
		if d.Rewrite != nil || len(d.Remember) > 0 {
			return fmt.Errorf("approve: a %s decision has no rewrite and remembers nothing", d.Kind)
		}
	default:
		return fmt.Errorf("approve: kind: want approve, deny or defer, got %q", d.Kind)
	}
	return nil
}

// Approver decides actions the policy asks about.
//
// # Contract
//
//   - Decide may block for as long as a person takes; when ctx is done it
//     returns promptly with ctx.Err(), which the harness treats as a
//     denial of that one action, not as a decision.
//   - Decide must be safe for concurrent use: runs of a tree ask in
//     parallel.
//   - Decide must not retain req after it returns.
//   - A returned error other than a context error is a denial with the
//     error as its reason; it never crashes the run.
type Approver interface {
	Decide(ctx context.Context, req *Request) (Decision, error)
}

// Func adapts a function to an [Approver]: the callback adapter.
type Func func(ctx context.Context, req *Request) (Decision, error)

// Decide calls f.
func (f Func) Decide(ctx context.Context, req *Request) (Decision, error) { return f(ctx, req) }

// ApproveAll approves every action as asked.
func ApproveAll() Approver {
	return Func(func(context.Context, *Request) (Decision, error) { return Decision{Kind: Approve}, nil })
}

// DenyAll denies every action with reason.
func DenyAll(reason string) Approver {
	if reason == "" {
		reason = "no approver is available"
	}
	return Func(func(context.Context, *Request) (Decision, error) { return Decision{Kind: Deny, Reason: reason}, nil })
}

// DeferAll defers every action: the run ends awaiting_approval at the
// first ask, for a decision from another process.
func DeferAll() Approver {
	return Func(func(context.Context, *Request) (Decision, error) { return Decision{Kind: Defer}, nil })
}

var (
	// ErrUnknownRequest is a decision for a request the run never made.
	ErrUnknownRequest = errors.New("approve: no such approval request")
	// ErrAlreadyDecided is a second decision for one request.
	ErrAlreadyDecided = errors.New("approve: the request was already decided")
	// ErrMismatch is an approved action that is no longer the action the
	// person saw: its hash differs, so nothing is done.
	ErrMismatch = errors.New("approve: the action no longer matches what was approved")
)
