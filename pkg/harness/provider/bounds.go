package provider

// Bounds on one response. Every provider in this module refuses a
// response that crosses one with an *Error of [KindResponseTooLarge]
// whose message names the bound and its value, and stops reading it:
// nothing is cut and kept. The HTTP vendors also bound each line and
// each event of a stream (sse.MaxEventSize, 1 MiB), and read at most
// [MaxErrorBody] bytes of a body that is not a stream.
const (
	// MaxResponseBytes bounds what one turn accumulates: its text and,
	// for every tool call, its id, name and arguments, together.
	MaxResponseBytes = 8 << 20
	// MaxToolCalls bounds the tool calls of one turn (for Anthropic,
	// its tool_use blocks).
	MaxToolCalls = 1024
	// MaxToolArgumentBytes bounds the arguments of one tool call.
	MaxToolArgumentBytes = 1 << 20
	// MaxErrorBody is how much of a body that is not an event stream
	// (a refusal, usually) is read. A longer body is not parsed, and
	// the rest of it is not read: its status alone classifies it.
	MaxErrorBody = 8 << 10
)
