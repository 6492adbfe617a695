package harness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/window"
)

// contextObservationMax bounds one observation in the context the model
// sees. The trace keeps the tool's whole (already bounded) output; the
// context keeps its head and tail around a marker.
const contextObservationMax = 16 << 10

// contextFileMax bounds the file content a single-file task shows.
const contextFileMax = 64 << 10

// systemPrompt is the stable prefix of every request of a run.
func systemPrompt(t *TaskContract, gated bool) string {
	var b strings.Builder
	b.WriteString(`You are a careful software agent run by io-harness. You work only through the tools you are given; each of your turns is one step.

How a run works:
`)
	switch {
	case gated:
		b.WriteString("- After every step the harness runs the verification described in the task. The run succeeds when every check passes. You cannot declare success yourself; only the verification can.\n")
		if len(t.OutputSchema) > 0 {
			b.WriteString("- Besides, the task asks for a final answer in JSON: give it in a turn without a tool call once the work is done.\n")
		}
	case len(t.OutputSchema) > 0:
		b.WriteString("- The run ends when you answer without calling a tool, with JSON that matches the task's schema; an answer that does not match is sent back to you.\n")
	default:
		b.WriteString("- The run ends when you answer without calling a tool: your answer is the result. Until then, each turn should call the tools you need.\n")
	}
	b.WriteString(`- The run stops when a budget (steps, time, tokens or money) is used up, so make every step count: call the tools you need, several in one turn when they do not depend on each other.
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

// noCallNote is what the model is told after a turn that called no tool
// and was not cut.
const noCallNote = "You did not call a tool. You act only through the tools; the run ends when the verification passes."

// turnNote returns the note the model is told after the turn resp, or ""
// when the turn needs none. A turn that called no tool is told so; a turn
// the output cap cut is told that instead, with the call the cut left
// unfinished (which did not run) named, so that the model does not take
// the missing call for its own choice and makes it again, smaller. A call
// a stream stopped inside for another reason is named as well.
//
// The loop adds the note as an ObservationNote of the step, so a resumed
// run shows the model the same text.
func turnNote(resp *provider.Response) string {
	var b strings.Builder
	cut := resp.Truncated()
	if cut {
		b.WriteString("Your turn was cut off at the output limit")
		if n := resp.Usage.OutputTokens; n > 0 {
			fmt.Fprintf(&b, " after %d output tokens", n)
		}
		b.WriteString(".")
	}
	if n := len(resp.DroppedCalls); n > 0 {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		names := make([]string, 0, n)
		for _, name := range resp.DroppedCalls {
			if name == "" {
				names = append(names, "a tool")
			} else {
				names = append(names, fmt.Sprintf("%q", clipName(name)))
			}
		}
		what := "call"
		if n > 1 {
			what = "calls"
		}
		fmt.Fprintf(&b, "The %s to %s %s cut off before %s arguments were complete, so %s not run.",
			what, joinAnd(names), pick(n > 1, "were", "was"), pick(n > 1, "their", "its"), pick(n > 1, "they were", "it was"))
		if len(resp.ToolCalls) > 0 {
			b.WriteString(" The calls before it ran; their results are above.")
		}
		if cut {
			b.WriteString(" Make it again with less in one call: write a large file in parts (write_file with the first part, then edit_file to add the rest), and keep the text before a call short.")
		} else {
			b.WriteString(" Make it again if it is still needed.")
		}
		return b.String()
	}
	if len(resp.ToolCalls) > 0 {
		return ""
	}
	if cut {
		b.WriteString(" You did not get to call a tool: keep your text short and call the tools you need; you act only through them.")
		return b.String()
	}
	return noCallNote
}

// clipName bounds a tool name the model wrote, for a note.
func clipName(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !isCharStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// joinAnd joins words as a list in a sentence: "a", "a and b", "a, b and c".
func joinAnd(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

func pick(c bool, yes, no string) string {
	if c {
		return yes
	}
	return no
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

// defaultContextShare is the part of the model's context window a
// request's input may take when Options set none: the rest is room for
// the output and for the estimate's error.
const defaultContextShare = 0.6

// contextLimit is how many input tokens the next request may hold: the
// share of the active model's window less the system prompt and the tool
// list, or 0 (no limit) when the window is unknown.
func (r *runner) contextLimit() int64 {
	l, ok := provider.LimitsOf(r.providers[r.active])
	if !ok || l.ContextWindow <= 0 {
		return 0
	}
	share := r.opts.ContextShare
	if share <= 0 || share > 1 {
		share = defaultContextShare
	}
	fixed := provider.EstimateInput(&provider.Request{System: r.system, Tools: r.specs})
	return max(int64(float64(l.ContextWindow)*share)-fixed, 1)
}

// request builds the next turn's request within limit input tokens (0:
// no limit), folding the history when it would not fit.
func (r *runner) request(ctx context.Context, n int, limit int64) (*provider.Request, error) {
	var pre []provider.Message
	for _, o := range r.pre {
		if o.Kind != store.ObservationFold {
			pre = append(pre, provider.Message{Role: provider.RoleUser, Content: window.ClipMiddle(o.Output, contextObservationMax)})
		}
	}
	if r.task.SingleFile() {
		pre = append(pre, provider.Message{Role: provider.RoleUser, Content: r.currentFile()})
	}
	msgs, fold := r.mgr.Messages(pre, limit)
	if fold != nil {
		if err := r.fold(ctx, n, fold); err != nil {
			return nil, err
		}
		msgs, _ = r.mgr.Messages(pre, 0)
	}
	msgs = r.attachImages(msgs)
	return &provider.Request{System: r.system, Messages: msgs, Tools: r.specs, OutputSchema: r.task.OutputSchema, Step: n, Agent: r.agentPath()}, nil
}

// fold summarises the steps a fold takes away — by the model, its call
// drawn from the budgets and the step's spend, or by a digest when no
// model may be spent — and records the fold as the first observation of
// step n.
func (r *runner) fold(ctx context.Context, n int, fr *window.FoldRequest) error {
	summary, method := "", "digest"
	if !r.opts.DigestFolds {
		if s, ok, err := r.summarize(ctx, n, fr); err != nil {
			return err
		} else if ok {
			summary, method = s, "model"
		}
	}
	if summary == "" {
		summary = window.Digest(fr.Messages)
	}
	f := window.Fold{Through: fr.Through, Method: method, Summary: summary}
	r.mgr.Fold(f.Through, f.Summary)
	r.pre = append([]store.Observation{f.Observation()}, r.pre...)
	r.emit(Event{Kind: EventContextFold, Step: n,
		Reason: fmt.Sprintf("steps 1 to %d folded into a summary (%s): about %d input tokens before, %d after", fr.Through, method, fr.Tokens, fr.After)})
	return nil
}

// summarizePrompt asks the model for the summary of a fold.
const summarizePrompt = "The conversation above is your own work so far on the task. It no longer fits your context, so it will be replaced by your summary. " +
	"Write that summary for yourself: what you did, what you found out, which files you changed and how, what failed and why, and what is left to do. " +
	"Be specific (paths, names, commands) and brief. Do not call a tool."

// summarize asks the active provider for a fold's summary. ok is false
// when no model may be spent on it (the budgets cannot pay, or the call
// failed); the caller then digests. Only a store failure is an error.
func (r *runner) summarize(ctx context.Context, n int, fr *window.FoldRequest) (string, bool, error) {
	msgs := append([]provider.Message{{Role: provider.RoleUser, Content: r.taskText}}, fr.Messages...)
	msgs = append(msgs, provider.Message{Role: provider.RoleUser, Content: summarizePrompt})
	p := r.providers[r.active]
	req, draw, out := r.capRequest(ctx, p, &provider.Request{System: r.system, Messages: msgs, MaxOutputTokens: 2000, Agent: r.agentPath()})
	if out != nil {
		return "", false, nil
	}
	resp, err := p.Complete(ctx, req, nil)
	if err != nil {
		r.settle(draw, n, provider.Usage{}, provider.Cost{})
	} else {
		r.settle(draw, n, resp.Usage, resp.Cost)
	}
	if err != nil || len(resp.ToolCalls) > 0 || strings.TrimSpace(resp.Text) == "" {
		return "", false, nil
	}
	if err := r.recordSpend(ctx, &store.Spend{RunID: r.runID, Step: n, Attempt: 0,
		Provider: p.Name(), Usage: resp.Usage, Cost: resp.Cost, At: time.Now()}); err != nil {
		return "", false, storeError("record the spend of a fold", err)
	}
	// The summary's spend is the step's: committed with it, and counted by
	// the budgets from now on.
	r.foldUsage = r.foldUsage.Add(resp.Usage)
	r.foldCost = r.foldCost.Add(resp.Cost)
	return strings.TrimSpace(resp.Text), true, nil
}
