package abi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// Host tools are tools a host implements in its own language (a Python
// function, a Node function, a C callback) and registers with a run
// through the "tools" param of run.start and the resumes. To the loop a
// host tool is a tool.Tool like any other: the harness checks each call
// against the exec policy on the tool's name, records an intent first
// unless the tool is idempotent, and traces the call and its result.
//
// A call goes to the host as a host_tool_call event and comes back
// through tool.resolve. The arguments are validated against the tool's
// JSON Schema before the host sees them; the wait is bounded by the
// tool's timeout and ends with the run; a call the host does not take or
// answer in time, and an exception the host reports, are observations
// the model sees. Nothing a host does or fails to do ends the run.

// KindHostToolCall is the event of a call to a host tool: the run waits
// for tool.resolve on request_id.
const KindHostToolCall = "host_tool_call"

const (
	// defaultToolTimeout bounds a host tool call whose registration sets
	// no timeout_ms.
	defaultToolTimeout = 60 * time.Second
	// maxToolTimeout bounds timeout_ms.
	maxToolTimeout = time.Hour
	// maxHostTools bounds the tools one run registers.
	maxHostTools = 128
	// maxToolOutput bounds a host tool's observation, as the built-in
	// tools' are bounded.
	maxToolOutput = 32 << 10
	// keepExpired is how many ended host tool requests a run remembers,
	// so that a late answer is told why it is too late.
	keepExpired = 256
)

// HostToolSpec registers one host tool with a run.
type HostToolSpec struct {
	// Name is the name the model calls the tool by: a letter, then up to
	// 63 letters, digits, _ or -; not a built-in tool's.
	Name string `json:"name"`
	// Description tells the model what the tool does. Required.
	Description string `json:"description"`
	// Parameters is the JSON Schema of the arguments object (type
	// "object"); every call is validated against it before the host sees
	// it.
	Parameters json.RawMessage `json:"parameters"`
	// TimeoutMS bounds one call, from the moment it is queued for the
	// host to its answer; 0 means 60000, at most 3600000.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Idempotent says a repeated call leaves things as one call would:
	// the harness then records no intent before each call.
	Idempotent bool `json:"idempotent,omitempty"`
}

// hostTool is a registered host tool of one run.
type hostTool struct {
	spec    HostToolSpec
	schema  *verify.Schema
	timeout time.Duration
	r       *runEntry
}

// toolAnswer is a host's answer to one call.
type toolAnswer struct {
	Output string
	Err    string
}

// hostToolCallEvent is the event of a host tool call.
type hostToolCallEvent struct {
	Kind      string          `json:"kind"`
	Run       uint64          `json:"run"`
	RunID     string          `json:"run_id"`
	Step      int             `json:"step"`
	RequestID string          `json:"request_id"`
	CallID    string          `json:"call_id,omitempty"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	TimeoutMS int64           `json:"timeout_ms"`
}

// hostTools are the host tools a run method registers, compiled.
type hostTools struct {
	specs   []HostToolSpec
	schemas []*verify.Schema
}

// bind returns the tools of run r.
func (ht *hostTools) bind(r *runEntry) []tool.Tool {
	out := make([]tool.Tool, len(ht.specs))
	for i, s := range ht.specs {
		timeout := time.Duration(s.TimeoutMS) * time.Millisecond
		if timeout == 0 {
			timeout = defaultToolTimeout
		}
		out[i] = &hostTool{spec: s, schema: ht.schemas[i], timeout: timeout, r: r}
	}
	return out
}

// parseHostTools reads the "tools" param of a run method and compiles
// every tool's schema. It refuses what the harness would refuse later
// and what it cannot check: a bad name, a built-in's name, a name twice,
// a missing description, a schema that does not compile or is not an
// object schema.
func parseHostTools(raw json.RawMessage) (*hostTools, error) {
	specs, schemas, err := parseToolSpecs(raw)
	if err != nil || len(specs) == 0 {
		return nil, err
	}
	return &hostTools{specs: specs, schemas: schemas}, nil
}

func parseToolSpecs(raw json.RawMessage) ([]HostToolSpec, []*verify.Schema, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var specs []HostToolSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&specs); err != nil {
		return nil, nil, fieldError("params.tools", "want an array of {name, description, parameters, timeout_ms, idempotent}: %v", err)
	}
	if len(specs) > maxHostTools {
		return nil, nil, fieldError("params.tools", "%d tools; at most %d", len(specs), maxHostTools)
	}
	seen := map[string]bool{}
	schemas := make([]*verify.Schema, len(specs))
	for i, s := range specs {
		field := fmt.Sprintf("params.tools[%d]", i)
		switch {
		case !tool.ValidName(s.Name):
			return nil, nil, fieldError(field+".name", "%q: want a letter, then up to 63 letters, digits, _ or -", s.Name)
		case tool.IsBuiltin(s.Name):
			return nil, nil, fieldError(field+".name", "%q is a built-in tool's name", s.Name)
		case seen[s.Name]:
			return nil, nil, fieldError(field+".name", "%q appears twice", s.Name)
		case strings.TrimSpace(s.Description) == "":
			return nil, nil, fieldError(field+".description", "required: it tells the model what the tool does")
		case s.TimeoutMS < 0 || time.Duration(s.TimeoutMS)*time.Millisecond > maxToolTimeout:
			return nil, nil, fieldError(field+".timeout_ms", "want 0 (60000) to %d", maxToolTimeout.Milliseconds())
		}
		seen[s.Name] = true
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(s.Parameters, &obj); err != nil || string(obj["type"]) != `"object"` {
			return nil, nil, fieldError(field+".parameters", "want a JSON Schema of type \"object\"")
		}
		sch, err := verify.CompileSchema(s.Parameters)
		if err != nil {
			return nil, nil, fieldError(field+".parameters", "the schema does not compile: %v", err)
		}
		schemas[i] = sch
	}
	return specs, schemas, nil
}

func fieldError(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Message: field + ": " + fmt.Sprintf(format, args...), Details: map[string]any{"field": field}}
}

// Spec implements tool.Tool.
func (t *hostTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: t.spec.Name, Description: t.spec.Description, Parameters: t.spec.Parameters}
}

// Idempotent implements tool.Idempotent.
func (t *hostTool) Idempotent() bool { return t.spec.Idempotent }

// Call implements tool.Tool: it validates the arguments, hands the call
// to the host and waits for the answer, within the tool's timeout and
// the run's life.
func (t *hostTool) Call(ctx context.Context, _ *tool.Env, args json.RawMessage) tool.Result {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage(`{}`)
	}
	if err := t.schema.Check(args); err != nil {
		return tool.Result{IsError: true, Output: fmt.Sprintf("[error] the arguments of %s do not match its parameters schema: %v", t.spec.Name, err)}
	}
	ans, err := t.r.callHost(ctx, t, args)
	if err != nil {
		return tool.Result{IsError: true, Output: fmt.Sprintf("[error] %s: %v", t.spec.Name, err)}
	}
	if ans.Err != "" {
		return tool.Result{IsError: true, Output: bound(fmt.Sprintf("[error] %s failed: %s", t.spec.Name, ans.Err))}
	}
	return tool.Result{Output: bound(ans.Output)}
}

// bound cuts s to maxToolOutput bytes on a UTF-8 boundary, saying how
// much was cut.
func bound(s string) string {
	if len(s) <= maxToolOutput {
		return s
	}
	cut := maxToolOutput - 96
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[... %d more bytes cut: a tool's output is at most %d bytes]", len(s)-cut, maxToolOutput)
}

func newToolRequestID() string {
	var b [10]byte
	rand.Read(b[:])
	return "htc_" + hex.EncodeToString(b[:])
}

// callHost queues one call for the host and waits for its answer. It
// fails when the host does not take the call or answer it within the
// tool's timeout, and when the run ends.
func (r *runEntry) callHost(ctx context.Context, t *hostTool, args json.RawMessage) (toolAnswer, error) {
	id := newToolRequestID()
	ch := make(chan toolAnswer, 1)
	r.mu.Lock()
	if r.finished || r.toolPending == nil {
		r.mu.Unlock()
		return toolAnswer{}, fmt.Errorf("the run has ended")
	}
	r.toolPending[id] = ch
	step, callID := r.step, r.callID
	r.mu.Unlock()

	tctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	ev, err := json.Marshal(&hostToolCallEvent{Kind: KindHostToolCall, Run: r.id, RunID: r.RunID(), Step: step, RequestID: id,
		CallID: callID, Tool: t.spec.Name, Arguments: args, TimeoutMS: t.timeout.Milliseconds()})
	if err != nil {
		r.endToolRequest(id, "it could not be encoded")
		return toolAnswer{}, fmt.Errorf("the call could not be encoded: %v", err)
	}
	if !r.h.pushCtx(tctx, ev) {
		why := r.toolGiveUp(ctx, id, t.timeout, false)
		return toolAnswer{}, why
	}
	select {
	case ans := <-ch:
		return ans, nil
	case <-tctx.Done():
		return toolAnswer{}, r.toolGiveUp(ctx, id, t.timeout, true)
	}
}

// toolGiveUp ends a request the host did not answer and says why, for
// the model.
func (r *runEntry) toolGiveUp(ctx context.Context, id string, timeout time.Duration, queued bool) error {
	switch {
	case ctx.Err() != nil:
		r.endToolRequest(id, "the run was cancelled or ran out of time")
		return fmt.Errorf("not answered: the run was cancelled or ran out of time")
	case r.h.closing.Load():
		r.endToolRequest(id, "the harness was closed")
		return fmt.Errorf("not answered: the host closed the harness")
	case !queued:
		r.endToolRequest(id, fmt.Sprintf("the host took no events for %s", timeout))
		return fmt.Errorf("the host did not take the call within %s (its event queue stayed full: it is busy or has stopped reading events); nothing was done", timeout)
	}
	r.endToolRequest(id, fmt.Sprintf("it timed out after %s", timeout))
	return fmt.Errorf("the host did not answer within %s (it is busy, or has stopped reading events); the call may or may not have happened", timeout)
}

// endToolRequest forgets a pending request and remembers why, for a late
// answer.
func (r *runEntry) endToolRequest(id, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.toolPending, id)
	if r.toolExpired == nil {
		r.toolExpired = map[string]string{}
	}
	r.toolExpired[id] = why
	r.expiredOrder = append(r.expiredOrder, id)
	if n := len(r.expiredOrder) - keepExpired; n > 0 {
		for _, old := range r.expiredOrder[:n] {
			delete(r.toolExpired, old)
		}
		r.expiredOrder = append(r.expiredOrder[:0:0], r.expiredOrder[n:]...)
	}
}

// resolveTool answers a host tool request of the run. A repeated
// identical answer is accepted again; a different one is a conflict; an
// id the run never gave out is not_found at once.
func (r *runEntry) resolveTool(requestID string, ans toolAnswer) (string, error) {
	sum := sha256.Sum256([]byte(ans.Err + "\x00" + ans.Output))
	key := hex.EncodeToString(sum[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.toolAnswered[requestID]; ok {
		if prev == key {
			return "already_resolved", nil
		}
		return "", fmt.Errorf("%w: host tool request %s was already answered differently", errConflict, requestID)
	}
	if ch, ok := r.toolPending[requestID]; ok {
		delete(r.toolPending, requestID)
		if r.toolAnswered == nil {
			r.toolAnswered = map[string]string{}
		}
		r.toolAnswered[requestID] = key
		ch <- ans
		return "delivered", nil
	}
	if why, ok := r.toolExpired[requestID]; ok {
		return "", fmt.Errorf("%w: host tool request %s is no longer waiting: %s", errNotFound, requestID, why)
	}
	if r.finished {
		return "", fmt.Errorf("%w: run %s has ended", errNotFound, r.runID)
	}
	return "", fmt.Errorf("%w: run %s has made no host tool request %s", errNotFound, r.runID, requestID)
}

// pushCtx queues one event like push, but gives up when ctx ends: a call
// that must not wait longer than its own bound for a host that reads no
// events.
func (h *harnessEntry) pushCtx(ctx context.Context, ev []byte) bool {
	if h.closing.Load() {
		return false
	}
	select {
	case h.events <- ev:
		return true
	case <-h.closed:
		return false
	case <-ctx.Done():
		return false
	}
}
