// Package tool defines the [Tool] interface and the built-in workspace
// tools: read_file, write_file, edit_file, list_dir, grep, find and exec.
//
// Every path a tool touches is confined to the workspace root with
// [os.Root]: an absolute path, a ".." that climbs out, or a symlink that
// leads out is refused, and the refusal comes back to the model as an
// observation with its reason. A tool failure is data, never a Go error.
package tool

import (
	"context"
	"encoding/json"
	"os"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Tool is one action the model can take.
//
// # Contract
//
//   - Spec is constant for the life of the tool.
//   - Call must be safe for concurrent use.
//   - Call never returns a Go error: a bad argument, a refused path or a
//     failed action is a Result with IsError set, which the model sees and
//     can adapt to.
//   - ctx bounds the call; when it is done Call returns promptly.
//   - Call must not retain args.
type Tool interface {
	Spec() provider.ToolSpec
	Call(ctx context.Context, env *Env, args json.RawMessage) Result
}

// Idempotent is implemented by tools whose call, repeated with the same
// arguments, leaves the workspace as one call would. The harness writes an
// intent row before every call of a tool that does not report itself
// idempotent, so that a resume after a crash can tell the model the call
// is in doubt instead of repeating it blindly.
type Idempotent interface {
	Idempotent() bool
}

// ReadOnly is implemented by tools whose call changes nothing: it only
// reads the workspace. The harness runs the read-only calls of a turn
// concurrently, and tells the model their results in the order it made
// them.
type ReadOnly interface {
	ReadOnly() bool
}

// IsReadOnly reports whether t declares itself read-only.
func IsReadOnly(t Tool) bool {
	r, ok := t.(ReadOnly)
	return ok && r.ReadOnly()
}

// IsIdempotent reports whether t declares itself idempotent.
func IsIdempotent(t Tool) bool {
	i, ok := t.(Idempotent)
	return ok && i.Idempotent()
}

// Env is what a tool call may act on.
type Env struct {
	// Root is the workspace root. Every path is resolved inside it.
	Root *os.Root
	// Only, when not empty, is the complete list of slash-separated
	// workspace-relative paths a tool may touch; any other path is
	// refused. A single-file task sets it to its one file.
	Only []string
	// Gate is the permission boundary every effect goes through. Nil
	// allows everything the workspace confinement allows.
	Gate Gate
	// Sandbox runs the exec tool's commands. Nil makes exec unavailable:
	// commands never run on the host.
	Sandbox sandbox.Sandbox
	// Trusted runs the commands whose argv the harness builds itself
	// (the git tools) as the caller's own user, in the same containment;
	// nil means Sandbox.
	Trusted sandbox.Sandbox
	// Programs is the system PATH commands run with, in which a bare
	// program name is looked up. Nil means [DefaultPath].
	Programs *Programs
	// Files, when set, is the agent's view of a workspace it shares with
	// other agents: writes that would lose another agent's update are
	// refused (see [Files]). Nil means the run is alone in its workspace.
	Files Files
	// Names, when set, remembers the workspace's directory listings
	// between the commands of a run, so that a command on the workspace
	// itself lists only the directories that changed (see
	// [snapshot.Names]). Nil lists every directory every time.
	Names *snapshot.Names
	// Shadow, when set, is the run's copy of the workspace for exec and
	// the wasm tools where the sandbox cannot run a command on the
	// workspace itself: brought up to date before each command instead
	// of copied anew (see [snapshot.Shadow]). Nil copies the workspace
	// for every command.
	Shadow *snapshot.Shadow
	// NoSync leaves written files unsynced to disk. A run whose store is
	// not durable (in memory) sets it: a crash loses the run anyway, so
	// waiting for the disk buys nothing.
	NoSync bool
}

// Result is what a tool call produced, as the model will see it.
type Result struct {
	// Output is the observation text.
	Output string `json:"output"`
	// IsError marks a call that failed or was refused.
	IsError bool `json:"is_error,omitempty"`
	// Refusal, when not empty, is why the call was refused before it
	// acted (a path outside the workspace, a policy rule). A refused call
	// is also an error.
	Refusal string `json:"refusal,omitempty"`
	// Deferred, when not empty, is the approval request the call waits
	// on: it did nothing, and the run ends awaiting that decision.
	Deferred string `json:"deferred,omitempty"`
	// Changed lists the workspace files the call wrote, slash-separated.
	Changed []string `json:"changed,omitempty"`
	// Verdicts are the policy verdicts the call acted on without asking
	// and that kept something from happening: the files it did not copy
	// into a sandbox or back out of it. The harness traces them.
	Verdicts []policy.Verdict `json:"verdicts,omitempty"`
	// Images are pictures the model is shown with the observation, in
	// its next turn (see view_image). They are never encoded with the
	// result: the trace keeps what Output says of them (a hash and a
	// size), not their bytes.
	Images []provider.Image `json:"-"`
}
