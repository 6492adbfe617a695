package provider

// Price is a model's price in US dollars per million tokens. Vendor
// packages embed a table of list prices and let a config override it.
type Price struct {
	// Input is the price of a prompt token that is neither read from nor
	// written to a cache.
	Input float64 `json:"input"`
	// Output is the price of an output token, reasoning included.
	Output float64 `json:"output"`
	// CacheRead is the price of a prompt token read from a cache. Zero
	// means the Input price.
	CacheRead float64 `json:"cache_read,omitempty"`
	// CacheWrite is the price of a prompt token written to a cache. Zero
	// means the Input price.
	CacheWrite float64 `json:"cache_write,omitempty"`
}

// Cost returns what u costs at p. u is normalised (its InputTokens
// include both cache counts), so the formula is the same for every
// vendor:
//
//	(input − cache read − cache write)·Input + cache read·CacheRead
//	  + cache write·CacheWrite + output·Output
//
// The cost is known. A usage whose cache counts exceed its input tokens
// is priced as if the excess were zero.
func (p Price) Cost(u Usage) Cost {
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
