package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // the receiver decodes gzip
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// receiver is an OTLP trace receiver: it decodes what it is sent with the
// official protobuf definitions and keeps it.
type receiver struct {
	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
	headers  []map[string][]string
	got      chan struct{}
}

func newReceiver() *receiver { return &receiver{got: make(chan struct{}, 1)} }

func (rc *receiver) keep(req *coltracepb.ExportTraceServiceRequest, hdr map[string][]string) {
	h := map[string][]string{}
	for k, v := range hdr {
		h[strings.ToLower(k)] = v
	}
	rc.mu.Lock()
	rc.requests = append(rc.requests, req)
	rc.headers = append(rc.headers, h)
	rc.mu.Unlock()
	select {
	case rc.got <- struct{}{}:
	default:
	}
}

// ServeHTTP is OTLP/HTTP with protobuf bodies.
func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not OTLP/HTTP protobuf traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(data, req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.keep(req, r.Header.Clone())
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// grpcReceiver is OTLP/gRPC.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	rc *receiver
}

func (g grpcReceiver) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	g.rc.keep(req, md)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// serve starts a receiver for protocol and returns the endpoint to give
// the exporter.
func serve(t *testing.T, protocol string) (*receiver, string) {
	t.Helper()
	rc := newReceiver()
	if protocol == "grpc" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		coltracepb.RegisterTraceServiceServer(srv, grpcReceiver{rc: rc})
		go srv.Serve(ln)
		t.Cleanup(srv.Stop)
		return rc, "http://" + ln.Addr().String()
	}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

// spans returns every span received, with its resource's attributes.
func (rc *receiver) spans() ([]*tracepb.Span, map[string]string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	res := map[string]string{}
	for _, req := range rc.requests {
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				res[kv.Key] = kv.Value.GetStringValue()
			}
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out, res
}

// raw is every request re-encoded, to search for content.
func (rc *receiver) raw() []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var b bytes.Buffer
	for _, req := range rc.requests {
		data, _ := proto.Marshal(req)
		b.Write(data)
	}
	return b.Bytes()
}

func attrs(s *tracepb.Span) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func str(s *tracepb.Span, k string) string { return attrs(s)[k].GetStringValue() }
func num(s *tracepb.Span, k string) int64  { return attrs(s)[k].GetIntValue() }

func named(spans []*tracepb.Span, prefix string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// secret is in the model's text, a tool call's arguments and a file's
// content: it must reach a collector only when content is opted in.
const secret = "TOP-SECRET-8e1f"

func testRun(t *testing.T, sinks []harness.Sink) *harness.Result { return testRunGated(t, sinks, nil) }

// gated holds the turn of step 2 until gate is closed.
type gated struct {
	provider.Provider
	gate <-chan struct{}
}

func (g gated) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if req.Step == 2 && g.gate != nil {
		<-g.gate
	}
	return g.Provider.Complete(ctx, req, onText)
}

// testRunGated is testRun whose second step waits for gate.
func testRunGated(t *testing.T, sinks []harness.Sink, gate <-chan struct{}) *harness.Result {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes "+secret+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".env"), []byte("KEY=x\n"), 0o644)
	p, err := scripted.New(scripted.Script{Name: "openai:gpt-test", Turns: []scripted.Turn{
		{Text: "Reading the notes " + secret, ToolCalls: []scripted.Call{
			{Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`)},
			{Name: "read_file", Arguments: json.RawMessage(`{"path":".env"}`)}},
			Usage: &provider.Usage{InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 600}, CostUSD: ptr(0.0021),
			Fail: &scripted.Failure{Kind: provider.KindRateLimited, Times: 1, RetryAfterMS: 1}},
		{Text: "Writing it.", ToolCalls: []scripted.Call{{Name: "write_file", Arguments: json.RawMessage(`{"path":"out.txt","content":"` + secret + `"}`)}},
			Usage: &provider.Usage{InputTokens: 1400, OutputTokens: 30}, CostUSD: ptr(0.0013)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	pol := &policy.Policy{Version: 1, Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Deny, Net: policy.Deny},
		Layers: []policy.Layer{{Name: "secrets", Rules: []policy.Rule{{Act: policy.Read, Effect: policy.Deny, Pattern: ".env"}}}}}
	task := harness.TaskContract{Goal: "copy the notes", Root: dir, Verification: []verify.Check{{Kind: verify.WorkspaceFileContains, File: "out.txt", Text: secret}}}
	res, err := harness.Run(context.Background(), task, harness.Options{Provider: gated{p, gate}, Policy: pol, Sinks: sinks,
		Backoff: harness.Backoff{Base: harness.Duration(time.Millisecond), Max: harness.Duration(2 * time.Millisecond)}})
	if err != nil || res.Outcome.Kind != harness.Success {
		t.Fatalf("%v %+v", err, res)
	}
	return res
}

func ptr[T any](v T) *T { return &v }

// A run's spans reach a real OTLP receiver, over HTTP/protobuf and gRPC,
// shaped by the GenAI conventions: invoke_agent for the run, a step span,
// chat for each model call with its model, tokens (cached among them),
// finish reason and time to first chunk, execute_tool for each tool call
// with its verdict and outcome; cost where the conventions have no name.
// No content leaves unless asked for: the control is the same run with
// Content on, whose export carries the secret.
func TestSpansFollowTheGenAIConventions(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		for _, content := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/content=%v", protocol, content), func(t *testing.T) {
				rc, endpoint := serve(t, protocol)
				x, err := New(Config{Endpoint: endpoint, Protocol: protocol, Content: content, Headers: map[string]string{"x-api-key": "k1"}})
				if err != nil {
					t.Fatal(err)
				}
				res := testRun(t, []harness.Sink{x})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := x.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
				spans, resAttrs := rc.spans()
				if resAttrs["service.name"] != "io-harness" {
					t.Errorf("resource: %v", resAttrs)
				}
				rc.mu.Lock()
				h := rc.headers[0]
				rc.mu.Unlock()
				if got := h["x-api-key"]; len(got) != 1 || got[0] != "k1" {
					t.Errorf("headers: %v", h)
				}
				checkSpans(t, spans, res)
				leaked := bytes.Contains(rc.raw(), []byte(secret))
				if leaked != content {
					t.Errorf("content=%v, but the secret reached the collector: %v", content, leaked)
				}
				if st := x.Stats(); st.Exported != int64(len(spans)) || st.Failed != 0 {
					t.Errorf("stats %+v for %d spans", st, len(spans))
				}
			})
		}
	}
}

func checkSpans(t *testing.T, spans []*tracepb.Span, res *harness.Result) {
	t.Helper()
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[string(s.SpanId)] = s
		if !bytes.Equal(s.TraceId, spans[0].TraceId) {
			t.Errorf("%s is in another trace", s.Name)
		}
	}
	runs := named(spans, "invoke_agent ")
	if len(runs) != 1 {
		t.Fatalf("%d run spans in %v", len(runs), names(spans))
	}
	run := runs[0]
	if diff := cmp.Diff(map[string]string{"op": "invoke_agent", "id": res.RunID, "name": "root", "provider": "openai", "outcome": "success"},
		map[string]string{"op": str(run, "gen_ai.operation.name"), "id": str(run, "gen_ai.agent.id"), "name": str(run, "gen_ai.agent.name"),
			"provider": str(run, "gen_ai.provider.name"), "outcome": str(run, "io_harness.outcome")}); diff != "" {
		t.Errorf("the run span (-want +got):\n%s", diff)
	}
	if num(run, "gen_ai.usage.input_tokens") != res.Outcome.Usage.InputTokens || num(run, "gen_ai.usage.output_tokens") != res.Outcome.Usage.OutputTokens {
		t.Errorf("the run's tokens: %v", attrs(run))
	}
	if len(run.ParentSpanId) != 0 || !bytes.Equal(run.TraceId, traceIDBytes(res.RunID)) {
		t.Errorf("the run span is not the root of its run's trace")
	}
	steps := named(spans, "step ")
	chats := named(spans, "chat ")
	if len(steps) != 2 || len(chats) != 2 {
		t.Fatalf("steps %d, chats %d in %v", len(steps), len(chats), names(spans))
	}
	for _, s := range steps {
		if !bytes.Equal(s.ParentSpanId, run.SpanId) {
			t.Errorf("%s is not the run's child", s.Name)
		}
	}
	wantIn := []int64{1000, 1400}
	for i, c := range chats {
		p := byID[string(c.ParentSpanId)]
		if p == nil || !strings.HasPrefix(p.Name, "step ") || c.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("%s: parent %v, kind %v", c.Name, p, c.Kind)
		}
		a := attrs(c)
		if c.Name != "chat gpt-test" || a["gen_ai.operation.name"].GetStringValue() != "chat" || a["gen_ai.provider.name"].GetStringValue() != "openai" ||
			a["gen_ai.request.model"].GetStringValue() != "gpt-test" || a["gen_ai.usage.input_tokens"].GetIntValue() != wantIn[i] {
			t.Errorf("chat %d: %s %v", i, c.Name, a)
		}
		reasons := a["gen_ai.response.finish_reasons"].GetArrayValue().GetValues()
		if len(reasons) != 1 || reasons[0].GetStringValue() != "tool_calls" {
			t.Errorf("chat %d finish reasons: %v", i, reasons)
		}
		if ttfc := a["gen_ai.response.time_to_first_chunk"].GetDoubleValue(); ttfc <= 0 {
			t.Errorf("chat %d: time to first chunk %v", i, ttfc)
		}
		if a["io_harness.cost.usd"].GetDoubleValue() <= 0 || !a["io_harness.cost.known"].GetBoolValue() {
			t.Errorf("chat %d cost: %v", i, a)
		}
		if c.EndTimeUnixNano < c.StartTimeUnixNano {
			t.Errorf("chat %d ends before it starts", i)
		}
	}
	if got := num(chats[0], "gen_ai.usage.cache_read.input_tokens"); got != 600 {
		t.Errorf("cached tokens %d", got)
	}
	// The retry of the first call is an event of its step.
	var retried bool
	for _, ev := range byID[string(chats[0].ParentSpanId)].Events {
		if ev.Name == "retry" {
			for _, kv := range ev.Attributes {
				if kv.Key == "error.type" && kv.Value.GetStringValue() == "rate_limited" {
					retried = true
				}
			}
		}
	}
	if !retried {
		t.Errorf("the retry is not on its step")
	}
	tools := named(spans, "execute_tool ")
	var got []string
	for _, s := range tools {
		got = append(got, fmt.Sprintf("%s %s %s %s", str(s, "gen_ai.tool.name"), str(s, "io_harness.tool.verdict"), str(s, "io_harness.tool.outcome"),
			str(s, "gen_ai.operation.name")))
		if str(s, "gen_ai.tool.call.id") == "" {
			t.Errorf("%s has no call id", s.Name)
		}
	}
	slices.Sort(got)
	want := []string{"read_file allow ok execute_tool", "read_file deny refused execute_tool", "write_file allow ok execute_tool"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool spans (-want +got):\n%s", diff)
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func traceIDBytes(runID string) []byte {
	id := traceIDOf(runID)
	return id[:]
}

// A collector that is down does not delay a run: one that refuses
// connections, and one that accepts an export and never answers. The
// control is the unprotected exporter (each span exported as it ends, on
// the run's goroutine): against the silent collector, the run stands
// still inside an export until the collector lets go.
func TestCollectorDownDoesNotDelayTheRun(t *testing.T) {
	// Refused: a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	silent := func(t *testing.T) (string, chan struct{}, chan struct{}) {
		got, release := make(chan struct{}, 64), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
			srv.Close()
		})
		return srv.URL, got, release
	}

	t.Run("refused", func(t *testing.T) {
		x, err := New(Config{Endpoint: refused, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		testRun(t, []harness.Sink{x})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		x.Shutdown(ctx)
		if st := x.Stats(); st.Failed == 0 || st.Exported != 0 || !strings.Contains(st.LastError, "refused") {
			t.Errorf("stats: %+v", st)
		}
	})
	t.Run("silent", func(t *testing.T) {
		url, got, _ := silent(t)
		x, err := New(Config{Endpoint: url, Timeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		// Step 2 starts only once an export of step 1's spans hangs in the
		// collector; the run then finishes, and no export ever answers.
		hung := make(chan struct{})
		go func() {
			<-got
			close(hung)
		}()
		testRunGated(t, []harness.Sink{x}, hung)
		// Shutdown is bounded by its context, not by the collector.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := x.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("shutdown against a silent collector: %v", err)
		}
	})
	t.Run("silent, unprotected (control)", func(t *testing.T) {
		url, got, release := silent(t)
		x, err := New(Config{Endpoint: url, Timeout: time.Hour, sync: true})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testRun(t, []harness.Sink{x})
		}()
		select {
		case <-got:
		case <-time.After(60 * time.Second):
			t.Fatal("the collector never got an export")
		}
		// The run exports on its own goroutine and the collector has not
		// answered: it cannot have finished.
		select {
		case <-done:
			t.Fatal("the run finished while its export hung: the control is not unprotected")
		default:
		}
		close(release)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the run did not finish once the collector answered")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		x.Shutdown(ctx)
	})
}

// The process environment is not the caller's: with variables set in the
// process that would redirect, tag or switch off export, an exporter
// configured through an empty LookupEnv exports as its Config says. The
// controls are the SDK used as its documentation shows, which reads the
// process environment: it sends the stray header, takes the stray service
// name, and samples nothing.
func TestProcessEnvironmentIsNotRead(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-leak=1")
	t.Setenv("OTEL_SERVICE_NAME", "leaked")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "leak=1")

	rc, endpoint := serve(t, "http/protobuf")
	x, err := New(Config{Endpoint: endpoint, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	testRun(t, []harness.Sink{x})
	x.Shutdown(context.Background())
	spans, res := rc.spans()
	if len(spans) == 0 || res["service.name"] != "io-harness" || res["leak"] != "" {
		t.Errorf("%d spans, resource %v", len(spans), res)
	}
	for _, h := range rc.headers {
		if len(h["x-leak"]) > 0 {
			t.Errorf("the process's header was sent: %v", h)
		}
	}

	// The controls.
	plain := func(t *testing.T) *receiver {
		rc, endpoint := serve(t, "http/protobuf")
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
		if err != nil {
			t.Fatal(err)
		}
		res, _ := resource.New(context.Background(), resource.WithFromEnv())
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
		_, span := tp.Tracer("control").Start(context.Background(), "control")
		span.End()
		tp.Shutdown(context.Background())
		return rc
	}
	if spans, _ := plain(t).spans(); len(spans) != 0 {
		t.Errorf("the control sampled %d spans with OTEL_TRACES_SAMPLER=always_off", len(spans))
	}
	os.Unsetenv("OTEL_TRACES_SAMPLER")
	ctl := plain(t)
	_, res = ctl.spans()
	if res["service.name"] != "leaked" || len(ctl.headers) == 0 || len(ctl.headers[0]["x-leak"]) == 0 {
		t.Errorf("the control did not read the process environment: %v %v", res, ctl.headers)
	}
}

// The environment, read through LookupEnv, configures export as the
// OpenTelemetry specification says.
func TestConfigFromTheEnvironment(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    string // url or target
		headers map[string]string
		err     error
		errText string
	}{
		{"nothing", Config{}, "", nil, ErrDisabled, ""},
		{"base endpoint", Config{LookupEnv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")}, "http://c:4318/v1/traces", map[string]string{}, nil, ""},
		{"base with a path", Config{LookupEnv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c/otlp/")}, "https://c/otlp/v1/traces", map[string]string{}, nil, ""},
		{"traces endpoint as is", Config{LookupEnv: env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://other")}, "http://c:4318/custom", map[string]string{}, nil, ""},
		{"config wins", Config{Endpoint: "http://mine:1", LookupEnv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")}, "http://mine:1/v1/traces", map[string]string{}, nil, ""},
		{"grpc", Config{LookupEnv: env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")}, "c:4317", map[string]string{}, nil, ""},
		{"headers", Config{Headers: map[string]string{"b": "mine"}, LookupEnv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c",
			"OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=2, c = x%20y ,bad", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "a=3")},
			"http://c/v1/traces", map[string]string{"a": "3", "b": "mine", "c": "x y"}, nil, ""},
		{"disabled", Config{Endpoint: "http://c", LookupEnv: env("OTEL_SDK_DISABLED", "true")}, "", nil, ErrDisabled, ""},
		{"exporter none", Config{Endpoint: "http://c", LookupEnv: env("OTEL_TRACES_EXPORTER", "none")}, "", nil, ErrDisabled, ""},
		{"http/json", Config{Endpoint: "http://c", Protocol: "http/json"}, "", nil, nil, "want http/protobuf or grpc"},
		{"not a url", Config{Endpoint: "c:4318"}, "", nil, nil, "not an http or https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := resolve(tc.cfg)
			switch {
			case tc.err != nil || tc.errText != "":
				if tc.err != nil && !errors.Is(err, tc.err) || tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)) {
					t.Fatalf("error %v, want %v %q", err, tc.err, tc.errText)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			got := s.url
			if s.protocol == "grpc" {
				got = s.target
			}
			if got != tc.want {
				t.Errorf("endpoint %q, want %q", got, tc.want)
			}
			if diff := cmp.Diff(tc.headers, s.headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

// A tree is one trace: a child run's span is a child of its parent run's
// span, found through the store, though the two are driven apart; a
// resumed run's span is a child of its first.
func TestATreeIsOneTrace(t *testing.T) {
	st, err := sqlite.OpenMemory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lease, err := st.CreateRun(context.Background(), &store.Run{ID: "parent", Task: json.RawMessage(`{}`), StartedAt: time.Now()}, nil, store.Self(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.Run{{ID: "child", ParentID: "parent", AgentPath: "root/worker"}, {ID: "grandchild", ParentID: "child", AgentPath: "root/worker/helper"}} {
		r.Task, r.StartedAt, r.RootID, r.Status = json.RawMessage(`{}`), time.Now(), "parent", store.StatusRunning
		if err := st.CreateAgent(context.Background(), lease, &r, nil); err != nil {
			t.Fatal(err)
		}
	}
	rc, endpoint := serve(t, "http/protobuf")
	x, err := New(Config{Endpoint: endpoint, Parent: ParentFrom(st)})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	emit := func(run, path, kind string, step int, extra string) {
		t0 = t0.Add(time.Millisecond)
		x.Publish(run, fmt.Appendf(nil, `{"run_id":%q,"path":%q,"kind":%q,"step":%d,"at":%q%s}`, run, path, kind, step, t0.Format(time.RFC3339Nano), extra))
	}
	outcome := `,"outcome":{"kind":"success","steps":1,"usage":{"input_tokens":1,"output_tokens":1},"cost":{"usd":0,"known":true}}`
	emit("parent", "root", "run_started", 0, `,"provider":"scripted"`)
	emit("child", "root/worker", "run_started", 0, "")
	emit("grandchild", "root/worker/helper", "run_started", 0, "")
	emit("grandchild", "root/worker/helper", "outcome", 0, outcome)
	emit("child", "root/worker", "outcome", 0, outcome)
	emit("parent", "root", "outcome", 0, `,"outcome":{"kind":"awaiting_approval"}`)
	emit("parent", "root", "run_resumed", 0, "")
	emit("parent", "root", "outcome", 0, outcome)
	x.Shutdown(context.Background())
	spans, _ := rc.spans()
	by := map[string][]*tracepb.Span{}
	for _, s := range spans {
		by[str(s, "gen_ai.agent.id")] = append(by[str(s, "gen_ai.agent.id")], s)
	}
	if len(by["parent"]) != 2 || len(by["child"]) != 1 || len(by["grandchild"]) != 1 {
		t.Fatalf("spans: %v", names(spans))
	}
	first, resumed := by["parent"][0], by["parent"][1]
	if attrs(first)["io_harness.run.resumed"].GetBoolValue() {
		first, resumed = resumed, first
	}
	for _, c := range []struct {
		name          string
		span, parent  *tracepb.Span
		wantParentRun string
	}{
		{"child", by["child"][0], first, "parent"},
		{"grandchild", by["grandchild"][0], by["child"][0], "child"},
		{"resume", resumed, first, ""},
	} {
		if !bytes.Equal(c.span.ParentSpanId, c.parent.SpanId) || !bytes.Equal(c.span.TraceId, first.TraceId) {
			t.Errorf("%s is not under its parent in the root's trace", c.name)
		}
		if got := str(c.span, "io_harness.run.parent_id"); got != c.wantParentRun {
			t.Errorf("%s's parent run: %q", c.name, got)
		}
	}
	if len(first.ParentSpanId) != 0 {
		t.Errorf("the root run has a parent")
	}
}
