package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxOutput bounds every Result.Output, in bytes.
const maxOutput = 32 << 10

// outputReserve is the room kept below maxOutput for headers, trailers
// and truncation markers by the tools that bound their own output.
const outputReserve = 512

// callFunc is the body of a tool call, run by [invoke].
type callFunc func(ctx context.Context, env *Env, args json.RawMessage) Result

// invoke runs fn with the checks every tool shares: a usable env, a live
// context, and an output bounded to maxOutput bytes.
func invoke(ctx context.Context, env *Env, args json.RawMessage, fn callFunc) Result {
	if env == nil || env.Root == nil {
		return errorf("the tool has no workspace to act on")
	}
	if err := ctx.Err(); err != nil {
		return errorf("cancelled before the call started: %v", err)
	}
	r := fn(ctx, env, args)
	r.Output = bound(r.Output)
	return r
}

// errorf returns an error observation.
func errorf(format string, a ...any) Result {
	return Result{IsError: true, Output: fmt.Sprintf(format, a...)}
}

// refuse returns the observation for a path refused before any action.
func refuse(p, reason string) Result {
	return Result{IsError: true, Refusal: reason, Output: "[refused] " + p + ": " + reason}
}

// bound returns s cut to at most maxOutput bytes. A cut string ends with a
// marker that says how many bytes and lines were dropped. The cut falls on
// a line boundary when one is near, and never inside a UTF-8 sequence.
func bound(s string) string {
	if len(s) <= maxOutput {
		return s
	}
	cut := maxOutput - 128
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl >= cut/2 {
		cut = nl + 1
	} else {
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	dropped := s[cut:]
	lines := strings.Count(dropped, "\n")
	if !strings.HasSuffix(dropped, "\n") {
		lines++
	}
	sep := ""
	if !strings.HasSuffix(s[:cut], "\n") {
		sep = "\n"
	}
	return fmt.Sprintf("%s%s[output truncated: %d bytes in %d lines dropped; the limit is %d bytes]",
		s[:cut], sep, len(dropped), lines, maxOutput)
}

// plural returns "1 line" or "2 lines", and "1 entry" or "2 entries".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if w, ok := strings.CutSuffix(word, "y"); ok {
		return fmt.Sprintf("%d %sies", n, w)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// countLines returns the number of lines in b: the number of newlines,
// plus one for a last line that does not end with one.
func countLines(b []byte) int {
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}
