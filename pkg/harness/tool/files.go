package tool

import (
	"fmt"
)

// Files keeps agents that share a workspace from losing each other's
// writes. Each agent of a tree has its own Files over the tree's one
// workspace; a run alone in its workspace has none.
//
// A write is judged against what the agent has seen: it is refused with a
// *ConflictError when another agent wrote the file after this agent last
// read or wrote it. The model is told, reads the file again, and makes its
// change on top of the other agent's.
//
// # Contract
//
//   - Paths are workspace-relative and slash-separated, as the tools
//     resolve them: the file a symlink leads to, not the link.
//   - Mark, Saw and Write are safe for concurrent use.
//   - Write runs write at most once, with no other agent's Write of the
//     same path in between its check and its end.
type Files interface {
	// Mark is the current point in the workspace's history of writes.
	Mark() uint64
	// Saw notes that the agent read p as it was at mark at, or later.
	Saw(p string, at uint64)
	// Write runs write, which replaces p, unless another agent wrote p
	// after since — or, when since is zero, after this agent last saw p,
	// or ever when it never did. It returns write's error, or a
	// *ConflictError without running it.
	Write(p string, since uint64, write func() error) error
}

// ConflictError is a write refused because another agent changed the
// file after the writer last saw it.
type ConflictError struct {
	// Path is the file.
	Path string
	// By is the agent path of the agent that wrote it last.
	By string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s was written by agent %s after you last read it; read it again and make your change on top of theirs", e.Path, e.By)
}

// conflict is the observation of a refused write.
func conflict(e *ConflictError) Result {
	return Result{IsError: true, Output: "[conflict] " + e.Error()}
}

// saw notes, when the run shares its workspace, that the agent read the
// file p (through its links) at mark at.
func saw(env *Env, p string, at uint64) {
	if env.Files == nil {
		return
	}
	if target, err := resolveLinks(env.Root, p); err == nil {
		env.Files.Saw(target, at)
	}
}

// mark is the Files mark before a read, or zero when the run is alone.
func mark(env *Env) uint64 {
	if env.Files == nil {
		return 0
	}
	return env.Files.Mark()
}
