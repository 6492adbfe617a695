// Package telemetry exports runs as OpenTelemetry traces over OTLP, with
// the official Go SDK, following the GenAI semantic conventions.
//
// An [Exporter] is a sink of a run's events (harness.Sink): it turns them
// into spans — one per run (an agent: invoke_agent), per step, per model
// call (chat) and per tool call (execute_tool) — on a goroutine of its own,
// a tenth of a second at a time, and another sends them to a collector
// every second. Nothing the exporter does can block or fail a run: the run
// pays an append to a bounded queue, which drops when full, and an export
// that fails is counted (Stats), never returned.
//
// Prompt and file content stays out of spans unless Config.Content opts
// in: spans carry names, sizes, tokens, costs, verdicts and outcomes.
//
// The configuration is read from Config and, through Config.LookupEnv,
// from the standard OTEL_EXPORTER_OTLP_* variables; the process
// environment itself is never read, so a library loaded into another
// program exports where its caller says, not where that program's
// environment points.
package telemetry

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Config says where and how runs are exported. Every field left empty is
// read from the environment through LookupEnv, as the OpenTelemetry
// specification names it; what neither gives takes the default.
type Config struct {
	// Endpoint is the collector. For http/protobuf, a URL: a base such as
	// http://localhost:4318, to which /v1/traces is added, or the whole
	// traces URL when it has a path. For grpc, host:port or a URL
	// (http:// means no TLS). Empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// (used as is), else OTEL_EXPORTER_OTLP_ENDPOINT (a base). Export is
	// off when neither names one.
	Endpoint string
	// Protocol is "http/protobuf" or "grpc". Empty:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL,
	// else http/protobuf.
	Protocol string
	// Headers are sent with every export, over those of
	// OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_TRACES_HEADERS.
	Headers map[string]string
	// Timeout bounds one export, retries included. Zero:
	// OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT in milliseconds, else 10s.
	Timeout time.Duration
	// ServiceName is the resource's service.name. Empty: OTEL_SERVICE_NAME,
	// else "io-harness". OTEL_RESOURCE_ATTRIBUTES adds attributes.
	ServiceName string
	// Content puts the model's text and tool calls' arguments and results
	// in spans (gen_ai.output.messages, gen_ai.tool.call.arguments and
	// .result), with what policy judged (io_harness.policy.target: a path,
	// a host, an exec's command line), reasons and check details. Off,
	// spans carry no content.
	Content bool
	// LookupEnv reads the environment; nil reads nothing. OTEL_SDK_DISABLED
	// and OTEL_TRACES_EXPORTER=none turn export off.
	LookupEnv func(string) (string, bool)
	// Parent returns the run a run was started by, for agent trees: a
	// child's run span is a child of its parent's, in its root's trace.
	// Nil makes every run a root.
	Parent func(runID string) string
	// QueueSize bounds the spans waiting for export; zero means 4096.
	QueueSize int

	// sync exports each span as it ends, on the run's goroutine: the
	// unprotected exporter that the tests' negative controls run.
	sync bool
}

// Exporter exports runs' events as spans. It is safe for concurrent use by
// any number of runs.
//
// It owns two goroutines, ended by Shutdown: one makes spans of the
// events published, a tenth of a second at a time, and one exports them.
type Exporter struct {
	cfg      settings // cfg.sync: the unprotected exporter of the tests
	tp       *sdktrace.TracerProvider
	tracer   trace.Tracer
	exporter *countingExporter
	batch    *batcher // nil for the unprotected, synchronous exporter
	conn     *grpc.ClientConn

	mu   sync.Mutex // guards runs: the spans being built
	runs map[string]*runState

	inMu      sync.Mutex // guards in
	in        []pending  // events not yet made spans
	down      atomic.Bool
	spansStop chan struct{}
	spansDone chan struct{}
	stopOnce  sync.Once

	dropped atomic.Int64 // events that could not be decoded or queued
}

// Stats counts what an exporter did.
type Stats struct {
	// Exported is the number of spans the collector accepted.
	Exported int64 `json:"exported"`
	// Failed is the number of spans in exports that failed.
	Failed int64 `json:"failed"`
	// Dropped counts the spans a full buffer dropped and the events that
	// could not be decoded or queued.
	Dropped int64 `json:"dropped"`
	// LastError is the last export's failure, if any.
	LastError string `json:"last_error,omitempty"`
}

// ErrDisabled is returned by [New] when nothing turns export on.
var ErrDisabled = errors.New("telemetry: no OTLP endpoint is configured")

// New returns an exporter for cfg.
//
// # Errors
//
// A configuration that names no endpoint, or that the environment turns
// off, is ErrDisabled: the caller runs without export. A protocol or
// endpoint that cannot be used is an error naming it.
func New(cfg Config) (*Exporter, error) {
	s, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	x := &Exporter{cfg: s, runs: map[string]*runState{}}
	var client otlptrace.Client
	switch s.protocol {
	case "grpc":
		creds := insecure.NewCredentials()
		if s.tls {
			creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.roots})
		}
		conn, err := grpc.NewClient(s.target, grpc.WithTransportCredentials(creds), grpc.WithNoProxy())
		if err != nil {
			return nil, fmt.Errorf("telemetry: grpc endpoint %q: %w", s.target, err)
		}
		x.conn = conn
		client = otlptracegrpc.NewClient(otlptracegrpc.WithGRPCConn(conn), otlptracegrpc.WithHeaders(s.headers),
			otlptracegrpc.WithTimeout(s.timeout), otlptracegrpc.WithCompressor("gzip"),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond,
				MaxInterval: 2 * time.Second, MaxElapsedTime: s.timeout}))
	default:
		// An HTTP client of our own: no proxy from the environment, and no
		// TLS settings but those resolved here.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.roots}
		var tlsCfg *tls.Config
		if s.tls {
			tlsCfg = tr.TLSClientConfig
		}
		client = otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(s.url), otlptracehttp.WithHeaders(s.headers),
			otlptracehttp.WithTimeout(s.timeout), otlptracehttp.WithCompression(s.compression),
			otlptracehttp.WithTLSClientConfig(tlsCfg),
			otlptracehttp.WithHTTPClient(&http.Client{Transport: tr, Timeout: s.timeout}),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond,
				MaxInterval: 2 * time.Second, MaxElapsedTime: s.timeout}))
	}
	exp, err := otlptrace.New(context.Background(), client)
	if err != nil {
		if x.conn != nil {
			x.conn.Close()
		}
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	// The resource is set on each span as it is exported: the provider's
	// own would merge in OTEL_RESOURCE_ATTRIBUTES from the process.
	x.exporter = &countingExporter{SpanExporter: exp, res: resource.NewSchemaless(s.resource...)}
	opts := []sdktrace.TracerProviderOption{
		// Every setting explicit, so that no OTEL_* variable of the
		// process changes what is sampled, limited or sent.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeValueLengthLimit: -1, AttributeCountLimit: 128,
			EventCountLimit: 256, LinkCountLimit: 16, AttributePerEventCountLimit: 32, AttributePerLinkCountLimit: 32}),
		sdktrace.WithIDGenerator(ids{}),
	}
	if cfg.sync {
		opts = append(opts, sdktrace.WithSyncer(x.exporter))
	} else {
		x.batch = newBatcher(x.exporter, s.queue, min(512, s.queue), time.Second, s.timeout)
		opts = append(opts, sdktrace.WithSpanProcessor(x.batch))
	}
	x.tp = sdktrace.NewTracerProvider(opts...)
	x.tracer = x.tp.Tracer("github.com/initorigin/io-harness-go/pkg/harness/telemetry")
	if !cfg.sync {
		x.spansStop, x.spansDone = make(chan struct{}), make(chan struct{})
		go x.spans()
	}
	return x, nil
}

// Wants implements harness.Sink: every run's events are exported.
func (x *Exporter) Wants(string) bool { return true }

// Publish implements harness.Sink: it takes one event, in its JSON form,
// for the exporter's goroutine to turn into spans. It never blocks: the
// run pays an append, and a full queue drops the event.
func (x *Exporter) Publish(runID string, data []byte) {
	if bytes.Contains(data, deltaKind) {
		return // the many pieces of a turn's text make no span
	}
	if x.cfg.sync {
		x.mu.Lock()
		defer x.mu.Unlock()
		x.take(runID, data)
		return
	}
	x.inMu.Lock()
	if len(x.in) >= maxPending || x.down.Load() {
		x.inMu.Unlock()
		x.dropped.Add(1)
		return
	}
	x.in = append(x.in, pending{runID, data})
	x.inMu.Unlock()
}

// maxPending bounds the events waiting to become spans.
const maxPending = 1 << 16

// pending is an event waiting to become spans.
type pending struct {
	runID string
	data  []byte
}

// take turns one event into span work. The caller holds x.mu.
func (x *Exporter) take(runID string, data []byte) {
	var e event
	if err := json.Unmarshal(data, &e); err != nil || e.Kind == "" {
		x.dropped.Add(1)
		return
	}
	if e.RunID == "" {
		e.RunID = runID
	}
	x.observe(&e)
}

// spans is the goroutine that turns queued events into spans, every
// spanEvery, and once more when the exporter shuts down.
func (x *Exporter) spans() {
	defer close(x.spansDone)
	t := time.NewTicker(spanEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			x.drain()
		case <-x.spansStop:
			x.drain()
			return
		}
	}
}

// spanEvery is how often queued events become spans.
const spanEvery = 100 * time.Millisecond

func (x *Exporter) drain() {
	x.inMu.Lock()
	batch := x.in
	x.in = nil
	x.inMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range batch {
		x.take(p.runID, p.data)
	}
}

var deltaKind = []byte(`"kind":"model_delta"`)

// Flush makes spans of every event published so far and exports those of
// every span that ended, waiting at most until ctx is done.
func (x *Exporter) Flush(ctx context.Context) error {
	if !x.cfg.sync {
		x.drain()
	}
	return x.tp.ForceFlush(ctx)
}

// Shutdown ends every open span, exports what is queued and stops, waiting
// at most until ctx is done: a collector that does not answer costs the
// caller no more than ctx allows. It is idempotent.
func (x *Exporter) Shutdown(ctx context.Context) error {
	x.stopOnce.Do(func() {
		if x.spansStop != nil {
			close(x.spansStop)
			<-x.spansDone
		}
		x.down.Store(true)
		x.mu.Lock()
		now := time.Now()
		for id, r := range x.runs {
			r.end(now, "", nil)
			delete(x.runs, id)
		}
		x.mu.Unlock()
	})
	err := x.tp.Shutdown(ctx)
	if x.conn != nil {
		x.conn.Close()
	}
	return err
}

// Stats reports what the exporter has done so far.
func (x *Exporter) Stats() Stats {
	s := Stats{Exported: x.exporter.ok.Load(), Failed: x.exporter.failed.Load(), Dropped: x.dropped.Load()}
	if x.batch != nil {
		s.Dropped += x.batch.droppedSpans()
	}
	if e := x.exporter.last.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

// countingExporter counts exports and keeps their failures from the SDK's
// global error handler, which would print them on the host's stderr.
type countingExporter struct {
	sdktrace.SpanExporter
	res        *resource.Resource
	ok, failed atomic.Int64
	last       atomic.Pointer[string]
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = withResource{s, c.res}
	}
	if err := c.SpanExporter.ExportSpans(ctx, out); err != nil {
		c.failed.Add(int64(len(spans)))
		msg := err.Error()
		c.last.Store(&msg)
		return nil
	}
	c.ok.Add(int64(len(spans)))
	return nil
}

// ParentFrom returns a Config.Parent that reads a run's parent from st.
// A run it cannot read has none.
func ParentFrom(st store.Reader) func(runID string) string {
	return func(runID string) string {
		r, err := st.Run(context.Background(), runID)
		if err != nil {
			return ""
		}
		return r.ParentID
	}
}

// withResource is a span with the exporter's resource.
type withResource struct {
	sdktrace.ReadOnlySpan
	res *resource.Resource
}

func (w withResource) Resource() *resource.Resource { return w.res }
