package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// harnessArm plays the task with harness.Run: the scripted provider, the
// built-in write_file, and a store (in memory or a file), a run with no
// gate that ends finished on the answering turn.
type harnessArm struct {
	label string
	st    store.Store
	p     *scriptedModel
	opts  harness.Options
}

// newHarnessArm returns the io-harness arm for s on st. The scripted
// model has no context window, so the run's context manager sends the
// whole history every turn, as the peers do; window, when positive, gives
// it one (the negative control: the history is folded).
func newHarnessArm(label string, s *script, st store.Store, window int64) (*harnessArm, error) {
	var turns []scripted.Turn
	usage := &provider.Usage{InputTokens: turnInputTokens, OutputTokens: turnOutputTokens}
	for _, t := range s.turns {
		st := scripted.Turn{Text: t.text, Usage: usage}
		if t.id != "" {
			st.ToolCalls = []scripted.Call{{ID: t.id, Name: writeFileName, Arguments: json.RawMessage(t.args)}}
		}
		turns = append(turns, st)
	}
	sp, err := scripted.New(scripted.Script{Turns: turns, ContextWindow: window})
	if err != nil {
		return nil, err
	}
	a := &harnessArm{label: label, st: st, p: &scriptedModel{sp}}
	a.opts = harness.Options{Provider: a.p, Store: st, DigestFolds: window > 0}
	return a, nil
}

func (a *harnessArm) name() string { return a.label }

// onDisk reports whether the run's store is durable: its workspace then
// belongs on the disk too, where the run's file writes are synced.
func (a *harnessArm) onDisk() bool { return a.st.Durable() }

func (a *harnessArm) play(ctx context.Context, p *play) (string, error) {
	res, err := harness.Run(ctx, harness.TaskContract{Goal: p.s.goal, Root: p.dir,
		Budgets: harness.Budgets{MaxSteps: p.s.n + 1}}, a.opts)
	if err != nil {
		return "", err
	}
	if o := res.Outcome; o.Kind != harness.Finished || o.Steps != p.s.n+1 {
		return "", fmt.Errorf("io-harness: the run ended %s after %d steps (%s), not finished after %d", o.Kind, o.Steps, o.Reason, p.s.n+1)
	}
	return res.Outcome.Answer, nil
}

// scriptedModel is the scripted provider under the checks every fake
// model makes (play.turn). It forwards the provider's price and limits.
type scriptedModel struct {
	*scripted.Provider
}

var _ provider.Limiter = scriptedModel{}

// Complete implements provider.Provider.
func (m scriptedModel) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	p := playOf(ctx)
	if p == nil {
		return nil, errors.New("scripted fake model: no play in the context")
	}
	last := ""
	for i := len(req.Messages) - 1; i >= 0 && i >= len(req.Messages)-3; i-- {
		if req.Messages[i].Role == provider.RoleTool {
			last = req.Messages[i].ToolCallID
			break
		}
	}
	offered := slices.ContainsFunc(req.Tools, func(t provider.ToolSpec) bool { return t.Name == writeFileName })
	if _, err := p.turn(len(req.Messages), last, offered); err != nil {
		return nil, &provider.Error{Provider: m.Name(), Kind: provider.KindBadRequest, Message: err.Error(), Err: err}
	}
	return m.Provider.Complete(ctx, req, onText)
}

// directArm is a floor: the task done by a hand-written loop with no
// framework, the scripted provider, and the history kept in a slice.
// Its write_file is the peers' (plain), or io-harness's own tool (an
// atomic write), which makes it io-harness's floor.
type directArm struct {
	p    *scriptedModel
	tool tool.Tool // nil: the peers' write_file
	spec provider.ToolSpec
}

// newDirectArm returns the floor that plays with h's model, with the
// peers' write_file or, when harnessTool is set, with io-harness's.
func newDirectArm(h *harnessArm, harnessTool bool) *directArm {
	a := &directArm{p: h.p, spec: provider.ToolSpec{Name: writeFileName, Description: writeFileDesc,
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)}}
	if harnessTool {
		i := slices.IndexFunc(tool.Workspace(), func(t tool.Tool) bool { return t.Spec().Name == writeFileName })
		a.tool = tool.Workspace()[i]
		a.spec = a.tool.Spec()
	}
	return a
}

func (a *directArm) name() string {
	if a.tool != nil {
		return "direct-tool"
	}
	return "direct"
}

func (a *directArm) play(ctx context.Context, p *play) (string, error) {
	if err := p.open(); err != nil {
		return "", err
	}
	defer p.close()
	req := &provider.Request{Tools: []provider.ToolSpec{a.spec}, Messages: []provider.Message{{Role: provider.RoleUser, Content: p.s.goal}}}
	for step := 1; ; step++ {
		req.Step = step
		resp, err := a.p.Complete(ctx, req, nil)
		if err != nil {
			return "", err
		}
		req.Messages = append(req.Messages, provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			return resp.Text, nil
		}
		for _, c := range resp.ToolCalls {
			out, err := a.call(ctx, p, c.Arguments)
			if err != nil {
				return "", err
			}
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, Content: out})
		}
	}
}

// call runs write_file with args.
func (a *directArm) call(ctx context.Context, p *play, args json.RawMessage) (string, error) {
	if a.tool == nil {
		return p.write(string(args))
	}
	if p.noWrite {
		return "wrote nothing", nil
	}
	res := a.tool.Call(ctx, &tool.Env{Root: p.root, NoSync: true}, args)
	if res.IsError {
		return "", fmt.Errorf("write_file: %s", res.Output)
	}
	return res.Output, nil
}
