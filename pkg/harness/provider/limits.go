package provider

// Limits are the token limits of a model, as the model catalogue (package
// models) or a config gives them. Zero means unknown.
type Limits struct {
	// ContextWindow is how many tokens one request may hold, prompt and
	// output together, as the vendor states it.
	ContextWindow int64 `json:"context_window,omitempty"`
	// MaxOutputTokens is the largest output cap the model accepts.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
}

// Limiter is implemented by providers that know the limits of their
// model. The harness reads it to size the context it sends: a context
// manager keeps a request's input below ContextWindow less the output it
// asks for.
//
// Limits must be cheap and constant for the provider's lifetime; ok is
// false when the model's limits are unknown (a model the catalogue does
// not list), and then the provider sends what it is asked to.
type Limiter interface {
	Limits() (l Limits, ok bool)
}

// LimitsOf returns p's limits, or ok false when p is not a [Limiter] or
// does not know them.
func LimitsOf(p Provider) (l Limits, ok bool) {
	if lm, is := p.(Limiter); is {
		return lm.Limits()
	}
	return Limits{}, false
}

// OutputCap returns the output cap to send for a request that asks for
// want tokens (0: as many as the model allows) and whose input is about
// input tokens: want, or MaxOutputTokens when want is 0, never above
// MaxOutputTokens, and never above the room ContextWindow leaves after
// the input, when there is some. A cap the model would refuse costs a
// failed request; one below what was asked only ends the turn sooner.
// It returns 0 (send none) when want is 0 and MaxOutputTokens is
// unknown. It is a pure function, so a resumed run sends the cap the
// first run sent.
func (l Limits) OutputCap(want, input int64) int64 {
	c := want
	if c <= 0 {
		c = l.MaxOutputTokens
	}
	if c <= 0 {
		return 0
	}
	if l.MaxOutputTokens > 0 && c > l.MaxOutputTokens {
		c = l.MaxOutputTokens
	}
	if l.ContextWindow > 0 && input > 0 {
		if room := l.ContextWindow - input; room > 0 && c > room {
			c = room
		}
	}
	return c
}
