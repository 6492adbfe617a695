package provider

// TokenCounter is implemented by providers that can count a request's input
// tokens exactly, or estimate them better than [EstimateInput].
type TokenCounter interface {
	CountInput(req *Request) int64
}

// bytesPerToken is the estimate's divisor. English prose and code average
// a little under four bytes per token in the BPE vocabularies of the
// vendors; four errs towards counting more tokens, so a budget check built
// on the estimate errs towards stopping early.
const bytesPerToken = 4

// perMessageTokens is the framing every message costs beyond its text.
const perMessageTokens = 4

// EstimateInput estimates the input tokens of req: four bytes to a token,
// rounded up, plus a few tokens of framing per message and tool. It is
// used to enforce a token budget before a request is sent when the
// provider is not a [TokenCounter].
func EstimateInput(req *Request) int64 {
	n := len(req.System)
	msgs := int64(len(req.Messages) + len(req.Tools))
	for i := range req.Messages {
		m := &req.Messages[i]
		n += len(m.Content) + len(m.ToolCallID)
		for j := range m.ToolCalls {
			c := &m.ToolCalls[j]
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return CountTextTokens(n) + msgs*perMessageTokens
}

// CountTextTokens estimates the tokens of n bytes of text.
func CountTextTokens(n int) int64 {
	return int64((n + bytesPerToken - 1) / bytesPerToken)
}
