package mcp

import (
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// EventKind names an event of the client.
type EventKind string

const (
	// EventConnect is a server started and initialized (Outcome "ok")
	// or not ("failed", Text says why): Transport, Protocol, Backend,
	// Host, Enforcement and LatencyMS.
	EventConnect EventKind = "mcp_connect"
	// EventTools is a server's tool list as the agent sees it (Tools);
	// Text notes the tools dropped and why. Outcome "changed" marks a
	// refresh that changed it, "failed" one that could not list.
	EventTools EventKind = "mcp_tools"
	// EventCall is a call's end: Tool, LatencyMS and Outcome (ok,
	// tool_error, timeout, crashed, cap, malformed, cancelled, error).
	EventCall EventKind = "mcp_call"
	// EventVerdict is a verdict on starting or reaching a server: the
	// policy's Verdict (with its rule and layer), and Outcome allowed,
	// refused or deferred.
	EventVerdict EventKind = "mcp_verdict"
	// EventStderr is a line of a stdio server's stderr (bounded).
	EventStderr EventKind = "mcp_stderr"
	// EventFault is a frame the client dropped: Outcome says what kind
	// (oversize, not_json, not_jsonrpc, unknown_id), Text shows it.
	EventFault EventKind = "mcp_fault"
	// EventExit is a stdio server's process gone; Text says how.
	EventExit EventKind = "mcp_exit"
	// EventRestart is a restart of a server that died, after WaitMS;
	// Attempt counts the failures in a row.
	EventRestart EventKind = "mcp_restart"
	// EventElicit is a server's elicitation, sent to Options.Elicit.
	EventElicit EventKind = "mcp_elicit"
)

// Event is one thing that happened to a server. It is plain data.
type Event struct {
	Server string    `json:"server"`
	Kind   EventKind `json:"kind"`
	At     time.Time `json:"at"`

	Transport string `json:"transport,omitempty"`
	Protocol  string `json:"protocol,omitempty"`
	// Backend is where a stdio server runs: "host" or a sandbox backend.
	Backend string `json:"backend,omitempty"`
	// Host is set for a server configured to run on the host.
	Host        bool                 `json:"host,omitempty"`
	Enforcement *sandbox.Enforcement `json:"enforcement,omitempty"`

	Tools     []string        `json:"tools,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	LatencyMS int64           `json:"latency_ms,omitempty"`
	Outcome   string          `json:"outcome,omitempty"`
	Verdict   *policy.Verdict `json:"verdict,omitempty"`
	Text      string          `json:"text,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	WaitMS    int64           `json:"wait_ms,omitempty"`
}
