package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness/media"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// Tool is one server's tool as the agent sees it. It implements
// [tool.Tool] and [tool.Idempotent].
//
// Call does not consult the gate: the harness checks every call of a
// tool that is not built in as an exec of its name before it calls it.
type Tool struct {
	s      *session
	name   string
	remote remoteTool
	spec   provider.ToolSpec
}

// descMax bounds a tool's description as the agent sees it.
const descMax = 2 << 10

func newTool(s *session, m mapping, r remoteTool) *Tool {
	desc := r.Description
	if len(desc) > descMax {
		desc = cut(desc, descMax) + " […]"
	}
	if desc == "" {
		desc = r.Title
	}
	desc = fmt.Sprintf("[MCP server %s, tool %s] %s", s.cfg.Name, r.Name, desc)
	return &Tool{s: s, name: m.Name, remote: r,
		spec: provider.ToolSpec{Name: m.Name, Description: strings.TrimSpace(desc), Parameters: r.InputSchema}}
}

// Spec implements tool.Tool.
func (t *Tool) Spec() provider.ToolSpec { return t.spec }

// Name is the tool's name as the agent sees it.
func (t *Tool) Name() string { return t.name }

// Server is the name of the tool's server.
func (t *Tool) Server() string { return t.s.cfg.Name }

// Remote is the server's own name for the tool.
func (t *Tool) Remote() string { return t.remote.Name }

// Idempotent reports what the tool's annotations say: a tool is
// idempotent only when it says it is read-only or idempotent. Every
// other call is an intent the harness records first, reported in doubt
// if a crash interrupts it.
func (t *Tool) Idempotent() bool { return t.remote.ReadOnly || t.remote.Idempotent }

// ReadOnly reports whether the tool's annotations say it is read-only.
func (t *Tool) ReadOnly() bool { return t.remote.ReadOnly }

// Call implements tool.Tool: it calls the tool on its server within the
// call timeout. Every failure is an observation: a server that died is
// restarted before the next call (after its backoff), never in the
// middle of this one, and the call is never repeated.
func (t *Tool) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	s := t.s
	started := time.Now()
	res, outcome := t.call(ctx, args)
	s.c.emit(Event{Server: s.cfg.Name, Kind: EventCall, Tool: t.name, LatencyMS: time.Since(started).Milliseconds(), Outcome: outcome})
	return res
}

func (t *Tool) call(ctx context.Context, args json.RawMessage) (tool.Result, string) {
	s := t.s
	if len(strings.TrimSpace(string(args))) > 0 && !json.Valid(args) {
		return tool.Result{IsError: true, Output: "[error] the arguments are not valid JSON"}, "error"
	}
	cn, err := s.ensure(ctx)
	if err != nil {
		return tool.Result{IsError: true, Output: fmt.Sprintf("[error] MCP server %s is not available: %v", s.cfg.Name, err)}, "unavailable"
	}
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout())
	defer cancel()
	r, err := cn.callTool(cctx, t.remote.Name, args)
	if err == nil {
		s.mu.Lock()
		s.failures = 0
		s.mu.Unlock()
		out := render(r)
		if r.IsError {
			return out, "tool_error"
		}
		return out, "ok"
	}
	fail := func(format string, a ...any) tool.Result {
		return tool.Result{IsError: true, Output: fmt.Sprintf("[error] MCP server %s, tool %s: ", s.cfg.Name, t.remote.Name) + fmt.Sprintf(format, a...)}
	}
	switch {
	case ctx.Err() != nil:
		return fail("cancelled: %v", ctx.Err()), "cancelled"
	case errors.Is(err, context.DeadlineExceeded) || cctx.Err() != nil:
		return fail("no answer within the call timeout of %s (call_timeout); the server was asked to cancel, and may have acted", s.cfg.callTimeout()), "timeout"
	case isHarness(err):
		outcome := "malformed"
		var ce errCap
		if strings.Contains(err.Error(), "output cap") || errors.As(err, &ce) {
			outcome = "cap"
		}
		return fail("%s", strings.TrimPrefix(err.Error(), "io-harness: ")), outcome
	case isClosed(err) || s.isDown(gen):
		how := "the connection closed"
		if exitErr, ok := s.waitExit(gen); ok {
			how = "the server exited"
			if exitErr != nil {
				how += " (" + exitErr.Error() + ")"
			}
		}
		s.lost(gen, how)
		tail := lastLine(s.stderr.String())
		msg := fmt.Sprintf("%s during the call; the call may have acted, and is not repeated. The server will be restarted before the next call.", how)
		if tail != "" {
			msg += " Its stderr ends: " + tail
		}
		return fail("%s", msg), "crashed"
	}
	return fail("%v", err), "error"
}

// isDown reports whether connection gen is known to be gone.
func (s *session) isDown(gen int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen == gen && s.down != ""
}

// isHarness reports whether err is an error the framer or the HTTP cap
// made.
func isHarness(err error) bool {
	var ce errCap
	return errors.As(err, &ce) || strings.HasPrefix(err.Error(), "io-harness: ") || strings.Contains(err.Error(), "io-harness: ")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return cut(s, 300)
}

// maxObservation bounds a call's observation, as the built-in tools'.
const maxObservation = 32 << 10

// render turns an answer into the observation the model sees: text as
// is, structured content as JSON, resource links and embedded resources
// described, images passed to the model as view_image passes them
// (package media checks each: format by its bytes, bounds from its
// header) with a line naming each, audio as a described placeholder,
// bounded to maxObservation bytes. Structured content is shown when no
// text says it.
func render(r *callResult) tool.Result {
	var b strings.Builder
	var images []provider.Image
	if r.IsError {
		b.WriteString("[tool error] ")
	}
	texts := map[string]bool{}
	for i, c := range r.Content {
		if i > 0 {
			b.WriteString("\n")
		}
		switch c.Type {
		case "text":
			b.WriteString(c.Text)
			texts[strings.TrimSpace(c.Text)] = true
		case "image":
			img, line := image(c, len(images))
			if img != nil {
				images = append(images, *img)
			}
			b.WriteString(line)
		case "audio":
			fmt.Fprintf(&b, "[%s: %s, %d bytes of base64; audio is not shown to the model]", c.Type, orUnknown(c.MIMEType), c.Size)
		case "resource_link":
			fmt.Fprintf(&b, "[resource link: %s", c.URI)
			if c.Name != "" {
				fmt.Fprintf(&b, " name=%q", c.Name)
			}
			if c.Title != "" {
				fmt.Fprintf(&b, " title=%q", c.Title)
			}
			if c.MIMEType != "" {
				fmt.Fprintf(&b, " type=%s", c.MIMEType)
			}
			if c.Desc != "" {
				fmt.Fprintf(&b, " — %s", cut(c.Desc, 500))
			}
			b.WriteString("]")
		case "resource":
			if c.Size > 0 || c.Text == "" {
				fmt.Fprintf(&b, "[embedded resource %s: %s, %d bytes of base64, not shown]", c.URI, orUnknown(c.MIMEType), c.Size)
			} else {
				fmt.Fprintf(&b, "[embedded resource %s (%s)]\n%s", c.URI, orUnknown(c.MIMEType), c.Text)
			}
		default:
			fmt.Fprintf(&b, "[content of type %q, not shown]", c.Type)
		}
	}
	// A tool that returns structured content should return the same as
	// text; the structured form is shown only when there is no text.
	if len(r.Structured) > 0 && string(r.Structured) != "null" && len(texts) == 0 {
		if len(r.Content) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("structured content: ")
		b.Write(r.Structured)
	}
	out := b.String()
	if strings.TrimSpace(out) == "" || out == "[tool error] " {
		out += "(no content)"
	}
	return tool.Result{Output: bound(out), IsError: r.IsError, Images: images}
}

// maxImages bounds the images one answer shows the model.
const maxImages = 8

// image checks an image block and returns the image to show with the
// line that names it, or only a line saying why it is not shown.
func image(c content, shown int) (*provider.Image, string) {
	if shown >= maxImages {
		return nil, fmt.Sprintf("[image: %s, not shown: an answer shows at most %d images]", orUnknown(c.MIMEType), maxImages)
	}
	l := media.DefaultLimits()
	if int64(base64.StdEncoding.DecodedLen(len(c.Data))) > l.MaxInput {
		return nil, fmt.Sprintf("[image: %s, %d bytes of base64, not shown: over the %d-byte limit]", orUnknown(c.MIMEType), c.Size, l.MaxInput)
	}
	data, err := base64.StdEncoding.DecodeString(c.Data)
	if err != nil {
		return nil, fmt.Sprintf("[image: %s, not shown: its data is not base64: %v]", orUnknown(c.MIMEType), err)
	}
	img, info, err := media.Prepare(data, l)
	if err != nil {
		return nil, fmt.Sprintf("[image: %s, not shown: %v]", orUnknown(c.MIMEType), err)
	}
	return &img, media.Describe("from the tool", img, info)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// cut returns at most n bytes of s, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// bound cuts s to maxObservation bytes with a marker saying how much was
// dropped.
func bound(s string) string {
	if len(s) <= maxObservation {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	head := cut(s, maxObservation-128)
	return strings.ToValidUTF8(head, "\uFFFD") + fmt.Sprintf("\n[output truncated: %d bytes dropped; the limit is %d bytes]", len(s)-len(head), maxObservation)
}
