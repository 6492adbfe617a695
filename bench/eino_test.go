package bench

import (
	"context"
	"errors"
	"slices"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// einoArm plays the task with eino's ReAct agent: a compose graph of a
// ChatModel node and a ToolsNode, whose state keeps every message and
// hands the model the whole list each turn.
type einoArm struct {
	agent *react.Agent
}

// newEinoArm builds the agent once for scripts of n steps. rewrite, when
// set, is the agent's MessageRewriter: the negative control that drops
// history.
func newEinoArm(ctx context.Context, n int, rewrite react.MessageModifier) (*einoArm, error) {
	a, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: &einoModel{},
		ToolsConfig:      compose.ToolsNodeConfig{Tools: []tool.BaseTool{einoWrite{}}},
		MessageRewriter:  rewrite,
		// Two graph steps a turn (the model, then the tools), and room.
		MaxStep: 2*n + 10,
	})
	if err != nil {
		return nil, err
	}
	return &einoArm{agent: a}, nil
}

func (*einoArm) name() string { return "eino" }

func (a *einoArm) play(ctx context.Context, p *play) (string, error) {
	if err := p.open(); err != nil {
		return "", err
	}
	defer p.close()
	msg, err := a.agent.Generate(ctx, []*schema.Message{schema.UserMessage(p.s.goal)})
	if err != nil {
		return "", err
	}
	return msg.Content, nil
}

// einoModel is a fake model.ToolCallingChatModel that plays the run's
// script.
type einoModel struct {
	tools []*schema.ToolInfo
}

var _ model.ToolCallingChatModel = (*einoModel)(nil)

// WithTools implements model.ToolCallingChatModel.
func (m *einoModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return &einoModel{tools: tools}, nil
}

// Generate implements model.BaseChatModel.
func (m *einoModel) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	model.GetCommonOptions(nil, opts...)
	p := playOf(ctx)
	if p == nil {
		return nil, errors.New("eino fake model: no play in the context")
	}
	last := ""
	for i := len(input) - 1; i >= 0 && i >= len(input)-3; i-- {
		if input[i].Role == schema.Tool {
			last = input[i].ToolCallID
			break
		}
	}
	offered := slices.ContainsFunc(m.tools, func(t *schema.ToolInfo) bool { return t.Name == writeFileName })
	t, err := p.turn(len(input), last, offered)
	if err != nil {
		return nil, err
	}
	msg := &schema.Message{Role: schema.Assistant, Content: t.text, ResponseMeta: &schema.ResponseMeta{
		FinishReason: "stop",
		Usage:        &schema.TokenUsage{PromptTokens: turnInputTokens, CompletionTokens: turnOutputTokens, TotalTokens: turnInputTokens + turnOutputTokens},
	}}
	if t.id != "" {
		msg.ResponseMeta.FinishReason = "tool_calls"
		msg.ToolCalls = []schema.ToolCall{{ID: t.id, Type: "function", Function: schema.FunctionCall{Name: writeFileName, Arguments: t.args}}}
	}
	return msg, nil
}

// Stream implements model.BaseChatModel: the whole turn in one chunk.
func (m *einoModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

// einoWrite is write_file as an eino tool.InvokableTool.
type einoWrite struct{}

var _ tool.InvokableTool = einoWrite{}

// Info implements tool.BaseTool.
func (einoWrite) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: writeFileName, Desc: writeFileDesc, ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
		"path":    {Type: schema.String, Desc: "File path relative to the workspace.", Required: true},
		"content": {Type: schema.String, Desc: "The new content of the file.", Required: true},
	})}, nil
}

// InvokableRun implements tool.InvokableTool.
func (einoWrite) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	p := playOf(ctx)
	if p == nil {
		return "", errors.New("eino write_file: no play in the context")
	}
	return p.write(args)
}
