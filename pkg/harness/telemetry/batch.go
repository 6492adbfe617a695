package telemetry

import (
	"context"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the exporter's span processor: ended spans wait in a bounded
// buffer, and one goroutine exports them every second, or as soon as a
// batch is full. It is the SDK's batch processor without its one cost on
// the run: that one hands each span to its goroutine through a channel,
// waking it for every span; here ending a span takes a lock and an append.
// A full buffer drops the span: a run never waits for a collector.
type batcher struct {
	exp     sdktrace.SpanExporter
	max     int // the buffer's bound
	size    int // spans per export
	every   time.Duration
	timeout time.Duration

	mu      sync.Mutex
	spans   []sdktrace.ReadOnlySpan
	dropped int64

	kick    chan struct{}      // a batch is full (capacity 1: never blocks)
	flushes chan chan struct{} // ForceFlush's requests
	stop    chan struct{}
	cancel  context.CancelFunc // aborts an export in flight, at Shutdown's deadline
	done    chan struct{}
	once    sync.Once
}

func newBatcher(exp sdktrace.SpanExporter, max, size int, every, timeout time.Duration) *batcher {
	ctx, cancel := context.WithCancel(context.Background())
	b := &batcher{exp: exp, max: max, size: size, every: every, timeout: timeout, kick: make(chan struct{}, 1),
		flushes: make(chan chan struct{}), stop: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go b.loop(ctx)
	return b
}

var _ sdktrace.SpanProcessor = (*batcher)(nil)

// OnStart implements sdktrace.SpanProcessor.
func (*batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: the span joins the buffer, or
// is dropped when the buffer is full.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	b.mu.Lock()
	if len(b.spans) >= b.max {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.spans = append(b.spans, s)
	full := len(b.spans) == b.size
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

func (b *batcher) loop(ctx context.Context) {
	defer close(b.done)
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.export(ctx)
		case <-b.kick:
			b.export(ctx)
		case ch := <-b.flushes:
			b.export(ctx)
			close(ch)
		case <-b.stop:
			b.export(ctx)
			return
		}
	}
}

// export sends everything buffered, a batch at a time, each bounded by the
// timeout.
func (b *batcher) export(ctx context.Context) {
	for ctx.Err() == nil {
		b.mu.Lock()
		n := min(len(b.spans), b.size)
		batch := b.spans[:n:n]
		b.spans = b.spans[n:]
		b.mu.Unlock()
		if n == 0 {
			return
		}
		ectx, cancel := context.WithTimeout(ctx, b.timeout)
		b.exp.ExportSpans(ectx, batch) // the counting exporter keeps the error
		cancel()
	}
}

// ForceFlush implements sdktrace.SpanProcessor: it exports what is
// buffered, waiting at most until ctx is done.
func (b *batcher) ForceFlush(ctx context.Context) error {
	ch := make(chan struct{})
	select {
	case b.flushes <- ch:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown implements sdktrace.SpanProcessor: it exports what is buffered
// and stops, waiting at most until ctx is done; an export still in flight
// then is abandoned, and the goroutine ends with it.
func (b *batcher) Shutdown(ctx context.Context) error {
	b.once.Do(func() { close(b.stop) })
	var err error
	select {
	case <-b.done:
	case <-ctx.Done():
		err = ctx.Err()
		b.cancel()
		<-b.done
	}
	b.cancel()
	if e := b.exp.Shutdown(ctx); err == nil {
		err = e
	}
	return err
}

// droppedSpans is how many spans a full buffer dropped.
func (b *batcher) droppedSpans() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}
