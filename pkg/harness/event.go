package harness

import (
	"encoding/json"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// EventKind names an event.
type EventKind string

const (
	// EventRunStarted opens a new run.
	EventRunStarted EventKind = "run_started"
	// EventRunResumed opens a resumed run. Text says where it resumes.
	EventRunResumed EventKind = "run_resumed"
	// EventStepStarted opens a step.
	EventStepStarted EventKind = "step_started"
	// EventModelDelta is a piece of the model's text while the turn
	// streams. It is delivered to observers only: it has no sequence
	// number and is never stored. After an EventRetry or EventFallback the
	// step's earlier deltas are void.
	EventModelDelta EventKind = "model_delta"
	// EventModelDone is a completed model turn, with its usage, cost and
	// latency.
	EventModelDone EventKind = "model_done"
	// EventRetry is a failed provider call that will be retried after
	// WaitMS.
	EventRetry EventKind = "retry"
	// EventFallback is a switch to the next provider of the fallback
	// chain.
	EventFallback EventKind = "fallback"
	// EventToolCall is a tool call about to run.
	EventToolCall EventKind = "tool_call"
	// EventToolResult is a tool call's result.
	EventToolResult EventKind = "tool_result"
	// EventRefusal is a tool call refused before it acted; Reason says
	// why.
	EventRefusal EventKind = "refusal"
	// EventInDoubt is an effect that may or may not have happened before
	// a crash, reported to the model on resume.
	EventInDoubt EventKind = "in_doubt"
	// EventVerification is the verification gate's verdict.
	EventVerification EventKind = "verification"
	// EventPolicy is a verdict of the permission boundary on an action:
	// Act, Target, Effect, and the Rule and Layer that decided (both
	// empty when the act's default did).
	EventPolicy EventKind = "policy"
	// EventApprovalRequested is an action sent to the approver; RequestID
	// names it.
	EventApprovalRequested EventKind = "approval_requested"
	// EventApprovalResolved is the approver's decision on RequestID:
	// Decision is approve, deny or defer; Reason says why.
	EventApprovalResolved EventKind = "approval_resolved"
	// EventSandbox is a step of a sandboxed command: create, exec,
	// cap_hit or teardown, with the backend that ran it.
	EventSandbox EventKind = "sandbox"
	// EventContextFold is a fold of the history into a summary, to keep
	// the request within the model's context window; Reason says which
	// steps, how, and the sizes before and after.
	EventContextFold EventKind = "context_fold"
	// EventMCP is something that happened to an MCP server: a connect, its
	// tool list, a call, a verdict, a stderr line, a fault, an exit or a
	// restart; MCP holds it.
	EventMCP EventKind = "mcp"
	// EventAgentSpawned is a child agent started, queued for a
	// concurrency slot, or adopted by a resumed step (Agent says which).
	EventAgentSpawned EventKind = "agent_spawned"
	// EventAgentRefused is a spawn refused for a cap of the tree; Reason
	// says which, and Agent.Cap names it.
	EventAgentRefused EventKind = "agent_refused"
	// EventAgentFinished is a child's outcome, as its parent learns it.
	EventAgentFinished EventKind = "agent_finished"
	// EventLedger is a provider call's draw on the tree's ledger.
	EventLedger EventKind = "ledger"
	// EventImage is an image a tool call returned, shown to the model in
	// its next turn: Image holds its hash and size, and its bytes only
	// when Options.TraceImages asks for them.
	EventImage EventKind = "image"
	// EventBundle is a bundle dropped when the run started: Target names
	// its directory and Reason says what is wrong with it.
	EventBundle EventKind = "bundle"
	// EventCheckpoint marks a committed step.
	EventCheckpoint EventKind = "checkpoint"
	// EventOutcome ends the run.
	EventOutcome EventKind = "outcome"
)

// Event is one thing that happened in a run. Events are delivered to the
// observer as they happen and stored in the trace with the step that
// produced them; the trace holds only committed steps' events.
//
// Seq increases by one per event within a run, across resumes; model
// deltas have none. The live stream may show events of a step that never
// committed (the process died before the commit); a resume reuses their
// sequence numbers.
type Event struct {
	RunID string    `json:"run_id"`
	Path  string    `json:"path"`
	Seq   int64     `json:"seq"`
	Step  int       `json:"step"`
	Kind  EventKind `json:"kind"`
	At    time.Time `json:"at"`

	// Text is model text (EventModelDelta, EventModelDone) or a note.
	Text string `json:"text,omitempty"`
	// Provider names the provider of a model event, retry or fallback.
	Provider string `json:"provider,omitempty"`
	// Usage and Cost are a turn's (EventModelDone).
	Usage *provider.Usage `json:"usage,omitempty"`
	Cost  *provider.Cost  `json:"cost,omitempty"`
	// LatencyMS is a provider call's duration.
	LatencyMS int64 `json:"latency_ms,omitempty"`
	// FirstTokenMS is the time from the start of the call that answered a
	// turn to its first streamed text (EventModelDone); absent when the
	// turn streamed no text, such as a turn of tool calls only.
	FirstTokenMS int64 `json:"first_token_ms,omitempty"`
	// Model is the model that answered, as the provider reported it, and
	// StopReason why the turn ended (EventModelDone).
	Model      string              `json:"model,omitempty"`
	StopReason provider.StopReason `json:"stop_reason,omitempty"`
	// Tool, CallID and Arguments describe a tool call.
	Tool      string          `json:"tool,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Output is a tool result's observation, cut to a preview; the trace's
	// steps hold it whole.
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// Reason explains a refusal, a retry, a fallback or an in-doubt call.
	Reason string `json:"reason,omitempty"`
	// ErrorKind classifies a retry's or fallback's provider failure.
	ErrorKind provider.Kind `json:"error_kind,omitempty"`
	// Attempt numbers provider calls within a step, from 1.
	Attempt int `json:"attempt,omitempty"`
	// WaitMS is the backoff before a retry.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// Act, Target, Effect, Rule and Layer are a policy verdict.
	Act    policy.Act    `json:"act,omitempty"`
	Target string        `json:"target,omitempty"`
	Effect policy.Effect `json:"effect,omitempty"`
	Rule   string        `json:"rule,omitempty"`
	Layer  string        `json:"layer,omitempty"`
	// RequestID names an approval request; Decision is its answer.
	RequestID string       `json:"request_id,omitempty"`
	Decision  approve.Kind `json:"decision,omitempty"`
	// Sandbox is a sandbox event (EventSandbox).
	Sandbox *sandbox.Event `json:"sandbox,omitempty"`
	// MCP is an MCP server's event (EventMCP).
	MCP *mcp.Event `json:"mcp,omitempty"`
	// Checks are the verification gate's results.
	Checks []verify.Result `json:"checks,omitempty"`
	// Passed is the verification gate's verdict.
	Passed *bool `json:"passed,omitempty"`
	// Outcome ends the run (EventOutcome).
	Outcome *Outcome `json:"outcome,omitempty"`
	// Agent is a child agent (EventAgentSpawned, EventAgentRefused,
	// EventAgentFinished).
	Agent *AgentEvent `json:"agent,omitempty"`
	// Ledger is a draw on the tree's ledger (EventLedger).
	Ledger *LedgerEvent `json:"ledger,omitempty"`
	// Image is an image a call returned (EventImage).
	Image *Image `json:"image,omitempty"`
}

// Image is the trace's record of an image shown to the model.
type Image struct {
	MediaType string `json:"media_type"`
	SHA256    string `json:"sha256"`
	Size      int    `json:"size"`
	// Data is the image's bytes, kept only when Options.TraceImages is
	// set.
	Data []byte `json:"data,omitempty"`
}

// Sink receives every event of a run in its JSON form (docs/abi.md,
// "Events") as it happens, model deltas included: the live stream to
// watchers in other processes (package watch) and the OpenTelemetry
// exporter (package telemetry) are sinks.
//
// # Contract
//
//   - Wants and Publish are called with the run's events serialised and in
//     order, on the goroutine that emits them (the run's, or an MCP
//     server's). They must not block: a sink that cannot keep up drops
//     events; it never slows the run.
//   - The run encodes an event only for sinks whose Wants(runID) returns
//     true, and then calls Publish with it; data is the sink's to keep.
type Sink interface {
	Wants(runID string) bool
	Publish(runID string, data []byte)
}

// outputPreview bounds Event.Output.
const outputPreview = 2048
