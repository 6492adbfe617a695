package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// event is the part of a harness event (docs/abi.md, "Events") that spans
// are made of.
type event struct {
	RunID        string          `json:"run_id"`
	Path         string          `json:"path"`
	Seq          int64           `json:"seq"`
	Step         int             `json:"step"`
	Kind         string          `json:"kind"`
	At           time.Time       `json:"at"`
	Text         string          `json:"text"`
	Provider     string          `json:"provider"`
	Usage        *usage          `json:"usage"`
	Cost         *cost           `json:"cost"`
	LatencyMS    int64           `json:"latency_ms"`
	FirstTokenMS int64           `json:"first_token_ms"`
	Model        string          `json:"model"`
	StopReason   string          `json:"stop_reason"`
	Tool         string          `json:"tool"`
	CallID       string          `json:"call_id"`
	Arguments    json.RawMessage `json:"arguments"`
	Output       string          `json:"output"`
	IsError      bool            `json:"is_error"`
	Reason       string          `json:"reason"`
	ErrorKind    string          `json:"error_kind"`
	Attempt      int             `json:"attempt"`
	WaitMS       int64           `json:"wait_ms"`
	Act          string          `json:"act"`
	Target       string          `json:"target"`
	Effect       string          `json:"effect"`
	Rule         string          `json:"rule"`
	Layer        string          `json:"layer"`
	RequestID    string          `json:"request_id"`
	Decision     string          `json:"decision"`
	Passed       *bool           `json:"passed"`
	Checks       []check         `json:"checks"`
	Outcome      *outcome        `json:"outcome"`
	Sandbox      *struct {
		Kind    string `json:"kind"`
		Backend string `json:"backend"`
	} `json:"sandbox"`
}

type usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

type cost struct {
	USD   float64 `json:"usd"`
	Known bool    `json:"known"`
}

type check struct {
	Kind     string        `json:"kind"`
	File     string        `json:"file"`
	Passed   bool          `json:"passed"`
	Detail   string        `json:"detail"`
	Duration time.Duration `json:"duration"`
}

type outcome struct {
	Kind   string `json:"kind"`
	Steps  int    `json:"steps"`
	Usage  usage  `json:"usage"`
	Cost   cost   `json:"cost"`
	Reason string `json:"reason"`
}

// The io_harness.* attributes: what the GenAI conventions have no name for.
const (
	attrRunID        = attribute.Key("io_harness.run.id")
	attrAgentPath    = attribute.Key("io_harness.agent.path")
	attrParentRun    = attribute.Key("io_harness.run.parent_id")
	attrResumed      = attribute.Key("io_harness.run.resumed")
	attrStep         = attribute.Key("io_harness.step")
	attrOutcome      = attribute.Key("io_harness.outcome")
	attrSteps        = attribute.Key("io_harness.steps")
	attrCostUSD      = attribute.Key("io_harness.cost.usd")
	attrCostKnown    = attribute.Key("io_harness.cost.known")
	attrLatencyMS    = attribute.Key("io_harness.latency_ms")
	attrAttempt      = attribute.Key("io_harness.attempt")
	attrVerdict      = attribute.Key("io_harness.tool.verdict")
	attrToolOutcome  = attribute.Key("io_harness.tool.outcome")
	attrRequestID    = attribute.Key("io_harness.approval.request_id")
	attrDecision     = attribute.Key("io_harness.approval.decision")
	attrPassed       = attribute.Key("io_harness.verification.passed")
	attrReason       = attribute.Key("io_harness.reason")
	attrWaitMS       = attribute.Key("io_harness.retry.wait_ms")
	attrPolicyAct    = attribute.Key("io_harness.policy.act")
	attrPolicyTarget = attribute.Key("io_harness.policy.target")
	attrPolicyEffect = attribute.Key("io_harness.policy.effect")
	attrPolicyRule   = attribute.Key("io_harness.policy.rule")
	attrPolicyLayer  = attribute.Key("io_harness.policy.layer")
)

// runState is one run's open spans.
type runState struct {
	id, path, provider string
	span               trace.Span
	ctx                context.Context
	step               trace.Span
	stepCtx            context.Context
	stepN              int
	tools              map[string]*toolState
	current            *toolState // the tool call whose verdicts and approvals arrive now
}

type toolState struct {
	span    trace.Span
	verdict string
	refused bool
}

// observe turns one event into span work. The caller holds x.mu.
func (x *Exporter) observe(e *event) {
	r := x.runs[e.RunID]
	if r == nil || e.Kind == "run_started" || e.Kind == "run_resumed" {
		if r != nil {
			r.end(e.At, "", nil)
		}
		r = x.startRun(e)
		x.runs[e.RunID] = r
	}
	switch e.Kind {
	case "step_started":
		r.endStep(e.At)
		r.stepN = e.Step
		r.stepCtx, r.step = x.tracer.Start(r.ctx, "step "+strconv.Itoa(e.Step), trace.WithTimestamp(e.At),
			trace.WithAttributes(attrStep.Int(e.Step), attrRunID.String(r.id)))
	case "model_done":
		x.modelCall(r, e)
	case "retry", "fallback":
		attrs := []attribute.KeyValue{semconv.GenAIProviderNameKey.String(vendor(e.Provider)), semconv.ErrorTypeKey.String(e.ErrorKind)}
		if e.Kind == "retry" {
			attrs = append(attrs, attrAttempt.Int(e.Attempt), attrWaitMS.Int64(e.WaitMS))
		}
		if x.cfg.content {
			attrs = append(attrs, attrReason.String(e.Reason))
		}
		r.parent().AddEvent(e.Kind, trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
	case "tool_call":
		attrs := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(e.Tool),
			semconv.GenAIToolCallID(e.CallID), semconv.GenAIToolTypeKey.String("function"), attrStep.Int(e.Step)}
		if x.cfg.content {
			attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(string(e.Arguments)))
		}
		_, span := x.tracer.Start(r.parentCtx(), "execute_tool "+e.Tool, trace.WithTimestamp(e.At),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
		t := &toolState{span: span, verdict: "none"}
		r.tools[e.CallID] = t
		r.current = t
	case "policy":
		attrs := []attribute.KeyValue{attrPolicyAct.String(e.Act),
			attrPolicyEffect.String(e.Effect), attrPolicyRule.String(e.Rule), attrPolicyLayer.String(e.Layer)}
		// The target is the call's arguments: a path, a host, an exec's
		// whole command line.
		if x.cfg.content {
			attrs = append(attrs, attrPolicyTarget.String(e.Target))
		}
		if t := r.current; t != nil {
			t.verdict = stricter(t.verdict, e.Effect)
			t.span.AddEvent("policy", trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		} else {
			r.parent().AddEvent("policy", trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		}
	case "approval_requested", "approval_resolved":
		attrs := []attribute.KeyValue{attrRequestID.String(e.RequestID)}
		if e.Decision != "" {
			attrs = append(attrs, attrDecision.String(e.Decision))
		}
		if e.Act != "" {
			attrs = append(attrs, attrPolicyAct.String(e.Act))
		}
		if x.cfg.content && e.Target != "" {
			attrs = append(attrs, attrPolicyTarget.String(e.Target))
		}
		if t := r.current; t != nil {
			t.span.AddEvent(e.Kind, trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		} else {
			r.parent().AddEvent(e.Kind, trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		}
	case "refusal":
		if t := r.tools[e.CallID]; t != nil {
			t.refused = true
			attrs := []attribute.KeyValue{}
			if x.cfg.content {
				attrs = append(attrs, attrReason.String(e.Reason))
			}
			t.span.AddEvent("refusal", trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		}
	case "tool_result":
		t := r.tools[e.CallID]
		if t == nil {
			return
		}
		delete(r.tools, e.CallID)
		if r.current == t {
			r.current = nil
		}
		result := "ok"
		switch {
		case e.RequestID != "":
			result = "deferred"
		case t.refused:
			result = "refused"
		case e.IsError:
			result = "error"
		}
		t.span.SetAttributes(attrVerdict.String(t.verdict), attrToolOutcome.String(result))
		if x.cfg.content {
			t.span.SetAttributes(semconv.GenAIToolCallResultKey.String(e.Output))
		}
		if result != "ok" {
			t.span.SetAttributes(semconv.ErrorTypeKey.String(result))
			t.span.SetStatus(codes.Error, result)
		}
		t.span.End(trace.WithTimestamp(e.At))
	case "verification":
		var total time.Duration
		for _, c := range e.Checks {
			total += c.Duration
		}
		passed := e.Passed != nil && *e.Passed
		_, span := x.tracer.Start(r.parentCtx(), "verify", trace.WithTimestamp(e.At.Add(-total)),
			trace.WithAttributes(attrStep.Int(e.Step), attrPassed.Bool(passed)))
		for _, c := range e.Checks {
			attrs := []attribute.KeyValue{attribute.String("io_harness.check.kind", c.Kind), attribute.Bool("io_harness.check.passed", c.Passed)}
			if c.File != "" {
				attrs = append(attrs, attribute.String("io_harness.check.file", c.File))
			}
			if x.cfg.content {
				attrs = append(attrs, attribute.String("io_harness.check.detail", c.Detail))
			}
			span.AddEvent("check", trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		}
		if !passed {
			span.SetStatus(codes.Error, "not passed")
		}
		span.End(trace.WithTimestamp(e.At))
		if r.step != nil {
			r.step.SetAttributes(attrPassed.Bool(passed))
		}
	case "context_fold", "in_doubt", "sandbox", "mcp":
		attrs := []attribute.KeyValue{}
		if e.Sandbox != nil {
			attrs = append(attrs, attribute.String("io_harness.sandbox.step", e.Sandbox.Kind), attribute.String("io_harness.sandbox.backend", e.Sandbox.Backend))
		}
		if t := r.current; t != nil && e.Kind != "context_fold" {
			t.span.AddEvent(e.Kind, trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		} else {
			r.parent().AddEvent(e.Kind, trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		}
	case "checkpoint":
		r.endStep(e.At)
	case "outcome":
		r.end(e.At, e.Outcome.kind(), e.Outcome)
		delete(x.runs, e.RunID)
	}
}

func (o *outcome) kind() string {
	if o == nil {
		return ""
	}
	return o.Kind
}

// startRun opens a run's span: invoke_agent, a child of its parent run's
// span in its root run's trace, so that a tree is one trace.
func (x *Exporter) startRun(e *event) *runState {
	r := &runState{id: e.RunID, path: e.Path, provider: e.Provider, tools: map[string]*toolState{}}
	if r.path == "" {
		r.path = "root"
	}
	root, parent := e.RunID, ""
	if x.cfg.parent != nil {
		parent = x.cfg.parent(e.RunID)
		for p, n := parent, 0; p != "" && n < 64; n++ {
			root = p
			p = x.cfg.parent(p)
		}
	}
	ctx := context.Background()
	f := forced{trace: traceIDOf(root)}
	// The first driving of a run has the span its children and its
	// resumes name; a resume is a child of it.
	under := parent
	if e.Kind == "run_resumed" {
		under = e.RunID
	} else {
		f.span = spanIDOf(e.RunID)
	}
	if under != "" {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: f.trace, SpanID: spanIDOf(under), TraceFlags: trace.FlagsSampled, Remote: true}))
	}
	ctx = context.WithValue(ctx, forcedKey{}, f)
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentID(e.RunID),
		semconv.GenAIAgentName(r.path), attrRunID.String(e.RunID), attrAgentPath.String(r.path),
		attrResumed.Bool(e.Kind == "run_resumed")}
	if e.Provider != "" {
		attrs = append(attrs, semconv.GenAIProviderNameKey.String(vendor(e.Provider)))
	}
	if parent != "" {
		attrs = append(attrs, attrParentRun.String(parent))
	}
	_, r.span = x.tracer.Start(ctx, "invoke_agent "+r.path, trace.WithTimestamp(e.At),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	r.ctx = trace.ContextWithSpan(context.Background(), r.span)
	return r
}

// modelCall records one model turn as a chat span inside its step.
func (x *Exporter) modelCall(r *runState, e *event) {
	prov := e.Provider
	if prov == "" {
		prov = r.provider
	}
	vendorName, model := vendor(prov), modelOf(prov)
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(vendorName),
		attrStep.Int(e.Step), attrLatencyMS.Int64(e.LatencyMS)}
	if model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(model))
	}
	if e.Model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(e.Model))
	}
	if u := e.Usage; u != nil {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(int(u.InputTokens)), semconv.GenAIUsageOutputTokens(int(u.OutputTokens)),
			semconv.GenAIUsageCacheReadInputTokens(int(u.CacheReadTokens)), semconv.GenAIUsageCacheCreationInputTokens(int(u.CacheWriteTokens)))
	}
	if c := e.Cost; c != nil {
		attrs = append(attrs, attrCostUSD.Float64(c.USD), attrCostKnown.Bool(c.Known))
	}
	if e.StopReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(finishReason(e.StopReason)...))
	}
	if e.FirstTokenMS > 0 {
		attrs = append(attrs, semconv.GenAIResponseTimeToFirstChunk(float64(e.FirstTokenMS)/1000))
	}
	if x.cfg.content && e.Text != "" {
		msg, _ := json.Marshal([]map[string]any{{"role": "assistant", "parts": []map[string]string{{"type": "text", "content": e.Text}}}})
		attrs = append(attrs, semconv.GenAIOutputMessagesKey.String(string(msg)))
	}
	name := "chat"
	if model != "" {
		name += " " + model
	}
	_, span := x.tracer.Start(r.parentCtx(), name, trace.WithTimestamp(e.At.Add(-time.Duration(e.LatencyMS)*time.Millisecond)),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(e.At))
}

// parent is the span that events of the moment belong to: the step under
// way, or the run.
func (r *runState) parent() trace.Span {
	if r.step != nil {
		return r.step
	}
	return r.span
}

func (r *runState) parentCtx() context.Context {
	if r.step != nil {
		return r.stepCtx
	}
	return r.ctx
}

func (r *runState) endStep(at time.Time) {
	for id, t := range r.tools {
		t.span.End(trace.WithTimestamp(at))
		delete(r.tools, id)
	}
	r.current = nil
	if r.step != nil {
		r.step.End(trace.WithTimestamp(at))
		r.step, r.stepCtx = nil, nil
	}
}

// end closes the run's span with its outcome; an empty kind is a run
// whose outcome this exporter never saw (it shut down first).
func (r *runState) end(at time.Time, kind string, o *outcome) {
	r.endStep(at)
	if o != nil {
		r.span.SetAttributes(attrOutcome.String(kind), attrSteps.Int(o.Steps),
			semconv.GenAIUsageInputTokens(int(o.Usage.InputTokens)), semconv.GenAIUsageOutputTokens(int(o.Usage.OutputTokens)),
			attrCostUSD.Float64(o.Cost.USD), attrCostKnown.Bool(o.Cost.Known))
		switch kind {
		case "success", "finished", "awaiting_approval":
		default:
			r.span.SetAttributes(semconv.ErrorTypeKey.String(kind))
			r.span.SetStatus(codes.Error, kind)
		}
	}
	r.span.End(trace.WithTimestamp(at))
}

// vendor is the gen_ai.provider.name of a provider's trace name
// ("openai:gpt-5" is openai).
func vendor(name string) string {
	v, _, _ := strings.Cut(name, ":")
	return v
}

// modelOf is the model of a provider's trace name, empty for a provider
// that names none ("scripted").
func modelOf(name string) string {
	_, m, _ := strings.Cut(name, ":")
	return m
}

// finishReason maps a turn's stop reason to the conventions' values.
func finishReason(s string) []string {
	switch s {
	case "end":
		return []string{"stop"}
	case "tool_use":
		return []string{"tool_calls"}
	case "max_tokens":
		return []string{"length"}
	}
	return []string{s}
}

// stricter returns the stricter of two policy verdicts; "none" is a call
// no policy judged.
func stricter(a, b string) string {
	rank := map[string]int{"none": 0, "allow": 1, "ask": 2, "deny": 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// forced carries the ids a run span must have.
type forced struct {
	trace trace.TraceID
	span  trace.SpanID
}

type forcedKey struct{}

// ids is the exporter's id generator: a run's trace id is a function of
// its root run's id, and the span of a run's first driving a function of
// the run's id, so that a tree driven in several processes, or resumed,
// is one trace; every other id is random.
type ids struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	f, _ := ctx.Value(forcedKey{}).(forced)
	tid := f.trace
	if !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64()|1)
	}
	return tid, ids{}.NewSpanID(ctx, tid)
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(forcedKey{}).(forced); ok && f.span.IsValid() {
		return f.span
	}
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], rand.Uint64()|1)
	return sid
}

func traceIDOf(runID string) trace.TraceID {
	sum := sha256.Sum256([]byte("io-harness/trace/" + runID))
	var t trace.TraceID
	copy(t[:], sum[:16])
	return t
}

func spanIDOf(runID string) trace.SpanID {
	sum := sha256.Sum256([]byte("io-harness/run/" + runID))
	var s trace.SpanID
	copy(s[:], sum[:8])
	return s
}
