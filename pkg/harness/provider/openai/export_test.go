package openai

import "github.com/initorigin/io-harness-go/pkg/harness/provider/internal/chat"

// The clients New and NewCompatible make, each with one rule of the
// structured-output mode switched off: the negative controls of
// TestStructuredOutput.

// NewUnstructured is New without the structured-output mode.
func NewUnstructured(cfg Config) (*Client, error) {
	return newOpenAI(cfg, func(o *chat.Options) { o.StructuredOutput = false })
}

// NewAnySchema is New sending response_format whatever the request's
// output schema, or none.
func NewAnySchema(cfg Config) (*Client, error) {
	return newOpenAI(cfg, func(o *chat.Options) { o.AnySchema = true })
}

// NewCompatibleStructured is NewCompatible with the structured-output
// mode on.
func NewCompatibleStructured(cfg Config) (*Client, error) {
	return newCompatible(cfg, func(o *chat.Options) { o.StructuredOutput = true })
}
