package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// contextObservationMax bounds one observation in the context the model
// sees. The trace keeps the tool's whole (already bounded) output; the
// context keeps its head and tail around a marker.
const contextObservationMax = 16 << 10

// contextFileMax bounds the file content a single-file task shows.
const contextFileMax = 64 << 10

// systemPrompt is the stable prefix of every request of a run.
func systemPrompt(t *TaskContract) string {
	var b strings.Builder
	b.WriteString(`You are a careful software agent run by io-harness. You work only through the tools you are given; each of your turns is one step.

How a run works:
- After every step the harness runs the verification described in the task. The run succeeds when every check passes. You cannot declare success yourself; only the verification can.
- The run stops when a budget (steps, time, tokens or money) is used up, so make every step count: call the tools you need, several in one turn when they do not depend on each other.
- Paths are relative to the workspace root. Nothing outside it can be reached; absolute paths, ".." that climbs out and symlinks that lead out are refused.
- A refused or failed tool call comes back to you as a result with its reason. Read it and adapt; repeating a refused call wastes a step.
`)
	if t.SingleFile() {
		b.WriteString("- This task is about one file. Change it with write_file (the whole new content) or edit_file (an exact replacement).\n")
	} else {
		b.WriteString("- Explore with list_dir, find, grep and read_file before you change anything; change files with edit_file (exact replacement) or write_file (whole content).\n")
	}
	return b.String()
}

// request builds the context for the next turn: the contract, the tool
// list, the history and the observations.
func (r *runner) request() *provider.Request {
	msgs := make([]provider.Message, 0, 2+3*len(r.history))
	msgs = appendUser(msgs, r.taskText)
	for i := range r.history {
		msgs = appendStep(msgs, &r.history[i])
	}
	for _, o := range r.pre {
		msgs = appendUser(msgs, clipMiddle(o.Output, contextObservationMax))
	}
	if r.task.SingleFile() {
		msgs = appendUser(msgs, r.currentFile())
	}
	return &provider.Request{System: r.system, Messages: msgs, Tools: r.specs}
}

// appendStep adds one committed step: any in-doubt note that preceded the
// turn, the assistant turn, a tool message per call, and the harness's
// notes and verification feedback as one user message.
func appendStep(msgs []provider.Message, st *store.Step) []provider.Message {
	for _, o := range st.Observations {
		if beforeTurn(o.Kind) {
			msgs = appendUser(msgs, clipMiddle(o.Output, contextObservationMax))
		}
	}
	a := st.Assistant
	if a.Content == "" && len(a.ToolCalls) == 0 {
		a.Content = "(no output)"
	}
	msgs = append(msgs, a)
	var notes []string
	for _, o := range st.Observations {
		switch o.Kind {
		case store.ObservationTool:
			msgs = append(msgs, provider.Message{Role: provider.RoleTool, ToolCallID: o.CallID,
				Content: clipMiddle(o.Output, contextObservationMax), IsError: o.IsError})
		case store.ObservationNote, store.ObservationVerification:
			notes = append(notes, clipMiddle(o.Output, contextObservationMax))
		}
	}
	if len(notes) > 0 {
		msgs = appendUser(msgs, strings.Join(notes, "\n\n"))
	}
	return msgs
}

// appendUser adds a user message, merging it into the previous one when
// that is a user message too, so that roles alternate.
func appendUser(msgs []provider.Message, text string) []provider.Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == provider.RoleUser {
		msgs[n-1].Content += "\n\n" + text
		return msgs
	}
	return append(msgs, provider.Message{Role: provider.RoleUser, Content: text})
}

// currentFile shows a single-file task's file as it is now.
func (r *runner) currentFile() string {
	name := filepath.Base(r.task.File)
	data, err := r.root.ReadFile(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s does not exist yet.", name)
	case err != nil:
		return fmt.Sprintf("%s cannot be read: %v", name, err)
	case !utf8.Valid(data):
		return fmt.Sprintf("%s is not UTF-8 text (%d bytes).", name, len(data))
	case len(data) > contextFileMax:
		return fmt.Sprintf("%s is %d bytes, too long to show whole; read it by line ranges with read_file.", name, len(data))
	}
	return fmt.Sprintf("Current content of %s (%d bytes):\n```\n%s\n```", name, len(data), data)
}

// clipMiddle keeps the head and tail of s within n bytes around a marker
// that says how much was cut.
func clipMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n*3/4, n/4
	for head > 0 && !isCharStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !isCharStart(s[start]) {
		start++
	}
	return s[:head] + fmt.Sprintf("\n[... %d bytes truncated ...]\n", start-head) + s[start:]
}

// beforeTurn reports whether observations of kind k are told to the model
// before its turn rather than after it.
func beforeTurn(k store.ObservationKind) bool {
	return k == store.ObservationInDoubt || k == store.ObservationDecision
}
