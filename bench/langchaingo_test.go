package bench

import (
	"context"
	"errors"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"
)

// langchaingoArm plays the task with langchaingo's agent executor and its
// tool-calling agent (OpenAIFunctionsAgent, which speaks llms tool calls
// to any llms.Model): the executor keeps every step, and the agent
// renders them all back into the model's messages each turn.
type langchaingoArm struct {
	exec *agents.Executor
}

// newLangchaingoArm builds the executor once for scripts of n steps.
func newLangchaingoArm(n int) *langchaingoArm {
	agent := agents.NewOpenAIFunctionsAgent(langchaingoModel{}, []tools.Tool{langchaingoWrite{}})
	return &langchaingoArm{exec: agents.NewExecutor(agent, agents.WithMaxIterations(n+1))}
}

func (*langchaingoArm) name() string { return "langchaingo" }

func (a *langchaingoArm) play(ctx context.Context, p *play) (string, error) {
	if err := p.open(); err != nil {
		return "", err
	}
	defer p.close()
	out, err := chains.Call(ctx, a.exec, map[string]any{"input": p.s.goal})
	if err != nil {
		return "", err
	}
	answer, _ := out["output"].(string)
	return answer, nil
}

// langchaingoModel is a fake llms.Model that plays the run's script.
type langchaingoModel struct{}

var _ llms.Model = langchaingoModel{}

// GenerateContent implements llms.Model.
func (langchaingoModel) GenerateContent(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var o llms.CallOptions
	for _, opt := range options {
		opt(&o)
	}
	p := playOf(ctx)
	if p == nil {
		return nil, errors.New("langchaingo fake model: no play in the context")
	}
	last := ""
scan:
	for i := len(msgs) - 1; i >= 0 && i >= len(msgs)-3; i-- {
		for _, part := range msgs[i].Parts {
			if r, ok := part.(llms.ToolCallResponse); ok {
				last = r.ToolCallID
				break scan
			}
		}
	}
	offered := false
	for _, f := range o.Functions {
		offered = offered || f.Name == writeFileName
	}
	for _, t := range o.Tools {
		offered = offered || t.Function != nil && t.Function.Name == writeFileName
	}
	t, err := p.turn(len(msgs), last, offered)
	if err != nil {
		return nil, err
	}
	choice := &llms.ContentChoice{Content: t.text, StopReason: "stop",
		GenerationInfo: map[string]any{"PromptTokens": turnInputTokens, "CompletionTokens": turnOutputTokens, "TotalTokens": turnInputTokens + turnOutputTokens}}
	if t.id != "" {
		choice.StopReason = "tool_calls"
		choice.ToolCalls = []llms.ToolCall{{ID: t.id, Type: "function", FunctionCall: &llms.FunctionCall{Name: writeFileName, Arguments: t.args}}}
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{choice}}, nil
}

// Call implements llms.Model.
func (m langchaingoModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// langchaingoWrite is write_file as a langchaingo tool. The agent passes
// it the call's arguments, JSON, as its input.
type langchaingoWrite struct{}

var _ tools.Tool = langchaingoWrite{}

func (langchaingoWrite) Name() string        { return writeFileName }
func (langchaingoWrite) Description() string { return writeFileDesc }

// Call implements tools.Tool.
func (langchaingoWrite) Call(ctx context.Context, input string) (string, error) {
	p := playOf(ctx)
	if p == nil {
		return "", errors.New("langchaingo write_file: no play in the context")
	}
	return p.write(input)
}
