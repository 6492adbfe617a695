package provider

// Price is a model's price in US dollars per million tokens. The model
// catalogue (package models) holds the list prices; a config may override
// them.
type Price struct {
	// Input is the price of a prompt token that is neither read from nor
	// written to a cache.
	Input float64 `json:"input"`
	// Output is the price of an output token, reasoning included.
	Output float64 `json:"output"`
	// CacheRead is the price of a prompt token read from a cache. Zero
	// means the Input price.
	CacheRead float64 `json:"cache_read,omitempty"`
	// CacheWrite is the price of a prompt token written to a cache (for
	// Anthropic, a five-minute write). Zero means the Input price.
	CacheWrite float64 `json:"cache_write,omitempty"`
	// LongContext, when set, is what a request whose prompt is longer
	// than its threshold costs instead: the vendors that price long
	// prompts higher bill the whole request, output included, at the
	// higher prices.
	LongContext *LongContextPrice `json:"long_context,omitempty"`
}

// LongContextPrice is the price of a request with a long prompt.
type LongContextPrice struct {
	// AboveInputTokens is the threshold: a request whose prompt (cached
	// tokens included) has more tokens than this is billed at these
	// prices.
	AboveInputTokens int64 `json:"above_input_tokens"`
	// Input, Output, CacheRead and CacheWrite are as in [Price]; a zero
	// cache price means this Input price.
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read,omitempty"`
	CacheWrite float64 `json:"cache_write,omitempty"`
}

// At returns the flat price of a request whose prompt has inputTokens
// tokens: p without its long-context part, or the long-context prices
// when the prompt is past their threshold.
func (p Price) At(inputTokens int64) Price {
	if lc := p.LongContext; lc != nil && inputTokens > lc.AboveInputTokens {
		return Price{Input: lc.Input, Output: lc.Output, CacheRead: lc.CacheRead, CacheWrite: lc.CacheWrite}
	}
	return Price{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite}
}

// Valid reports whether no price is negative and a long-context
// threshold is positive.
func (p Price) Valid() bool {
	if p.Input < 0 || p.Output < 0 || p.CacheRead < 0 || p.CacheWrite < 0 {
		return false
	}
	lc := p.LongContext
	return lc == nil || lc.AboveInputTokens > 0 && lc.Input >= 0 && lc.Output >= 0 && lc.CacheRead >= 0 && lc.CacheWrite >= 0
}

// Cost returns what u costs at p. u is normalised (its InputTokens
// include both cache counts), so the formula is the same for every
// vendor:
//
//	(input − cache read − cache write)·Input + cache read·CacheRead
//	  + cache write·CacheWrite + output·Output
//
// at the prices [Price.At] picks for u.InputTokens. The cost is known. A
// usage whose cache counts exceed its input tokens is priced as if the
// excess were zero.
func (p Price) Cost(u Usage) Cost {
	p = p.At(u.InputTokens)
	read, write := p.CacheRead, p.CacheWrite
	if read == 0 {
		read = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	plain := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	usd := float64(plain)*p.Input +
		float64(u.CacheReadTokens)*read +
		float64(u.CacheWriteTokens)*write +
		float64(u.OutputTokens)*p.Output
	return Cost{USD: usd / 1e6, Known: true}
}
