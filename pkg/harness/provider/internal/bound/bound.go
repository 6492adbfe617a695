// Package bound counts a response against the bounds every provider
// keeps (provider.MaxResponseBytes and its neighbours), so that a decoder
// can refuse a flood at the fragment that crosses a bound, before it
// buffers more.
package bound

import (
	"fmt"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// Turn counts what one turn has accumulated. The zero value is an empty
// turn.
type Turn struct {
	bytes int // text, and tool call ids, names and arguments
	calls int
}

// Add counts n more bytes of text or of a tool call's id, name or
// arguments.
func (t *Turn) Add(n int) error {
	if n > provider.MaxResponseBytes-t.bytes {
		return TooLarge(fmt.Sprintf("text and tool calls over %s (provider.MaxResponseBytes)", Size(provider.MaxResponseBytes)))
	}
	t.bytes += n
	return nil
}

// Call counts one more tool call.
func (t *Turn) Call() error {
	if t.calls >= provider.MaxToolCalls {
		return TooLarge(fmt.Sprintf("more than %d tool calls (provider.MaxToolCalls)", provider.MaxToolCalls))
	}
	t.calls++
	return nil
}

// Args counts add more bytes of arguments for a call that has have
// already, both against the call's bound and the turn's.
func (t *Turn) Args(have, add int) error {
	if add > provider.MaxToolArgumentBytes-have {
		return TooLarge(fmt.Sprintf("one tool call's arguments over %s (provider.MaxToolArgumentBytes)", Size(provider.MaxToolArgumentBytes)))
	}
	return t.Add(add)
}

// Check counts a whole response, as a decoder would have counted it
// while it streamed.
func Check(resp *provider.Response) error {
	var t Turn
	if err := t.Add(len(resp.Text)); err != nil {
		return err
	}
	for _, c := range resp.ToolCalls {
		if err := t.Call(); err != nil {
			return err
		}
		if err := t.Add(len(c.ID) + len(c.Name)); err != nil {
			return err
		}
		if err := t.Args(0, len(c.Arguments)); err != nil {
			return err
		}
	}
	return nil
}

// TooLarge returns the error of a response past a bound; what names the
// bound and its value. Its Provider is left for the caller.
func TooLarge(what string) *provider.Error {
	return &provider.Error{Kind: provider.KindResponseTooLarge, Message: "response refused: " + what}
}

// Size writes a byte count the way the bounds are written: "8 MiB",
// "8 KiB", else "n bytes".
func Size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
