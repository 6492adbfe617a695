package wiretest

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/sse"
)

// Wire builds one vendor's event stream, for [Bounds].
type Wire struct {
	// Head opens a turn; Tail ends it.
	Head, Tail string
	// Text is an event that carries text s.
	Text func(s string) string
	// Call is the events of tool call i: its start, then one event per
	// fragment of its arguments.
	Call func(i int, args ...string) string
}

// Flood is a response written piece by piece as the client reads it, so
// that a response far larger than memory costs the server nothing.
type Flood struct {
	Status      int    // 0 means 200
	ContentType string // "" means text/event-stream
	Parts       iter.Seq[string]
}

// FloodServer serves one Flood and counts the bytes it managed to write.
type FloodServer struct {
	*httptest.Server
	written atomic.Int64
}

// Written is how many bytes of the body the server wrote before the
// client went away or the flood ended.
func (s *FloodServer) Written() int64 { return s.written.Load() }

// NewFloodServer serves f to every request until the test ends.
func NewFloodServer(t testing.TB, f Flood) *FloodServer {
	s := &FloodServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		ct := f.ContentType
		if ct == "" {
			ct = "text/event-stream"
		}
		w.Header().Set("Content-Type", ct)
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		fl, _ := w.(http.Flusher)
		for part := range f.Parts {
			n, err := io.WriteString(w, part)
			s.written.Add(int64(n))
			if err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// Repeat yields s n times.
func Repeat(s string, n int) iter.Seq[string] {
	return func(yield func(string) bool) {
		for range n {
			if !yield(s) {
				return
			}
		}
	}
}

// Cat yields the parts of each sequence in turn.
func Cat(seqs ...iter.Seq[string]) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, seq := range seqs {
			for s := range seq {
				if !yield(s) {
					return
				}
			}
		}
	}
}

// One yields its arguments.
func One(parts ...string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, p := range parts {
			if !yield(p) {
				return
			}
		}
	}
}

// Calls yields tool calls from..to-1 of w, each with arguments args.
func Calls(w Wire, from, to int, args string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := from; i < to; i++ {
			if !yield(w.Call(i, args)) {
				return
			}
		}
	}
}

const (
	kib = 1 << 10
	mib = 1 << 20
	// endless is more than any bound lets through: a flood of it that
	// the client read to the end would take minutes and gigabytes.
	endless = 1 << 30
	// hungUp bounds what a server may write before the client that
	// refused its flood stops reading: the largest bound, 8 MiB, and
	// the socket buffers of both ends, with room to spare.
	hungUp = 32 * mib
	// maxAlloc bounds what a client may allocate while it refuses a
	// flood.
	maxAlloc = 16 * provider.MaxResponseBytes
)

// argsOf returns a JSON object of exactly n bytes, in fragments of at
// most 32 KiB.
func argsOf(n int) []string {
	s := `{"x":"` + strings.Repeat("a", n-8) + `"}`
	var out []string
	for len(s) > 0 {
		k := min(32*kib, len(s))
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// Bounds checks the bounds on a response against one vendor's client.
// For each bound a stream crosses it and must be refused, not retried,
// with a message that names the bound, while the server finds itself cut
// off well before the flood ends; and, as the negative control, a stream
// that stops exactly at the bound (or just under it) must be accepted
// whole. open returns the vendor's client of a server's URL.
func Bounds(t *testing.T, open func(t *testing.T, url string) provider.Provider, w Wire) {
	chunk := strings.Repeat("a", 64*kib)
	oneMiBArgs := argsOf(provider.MaxToolArgumentBytes)
	overArgs := argsOf(provider.MaxToolArgumentBytes + 1)
	errorJSON := func(n int) string {
		msg := strings.Repeat("b", n)
		return `{"error":{"message":"` + msg + `","type":"rate_limit_error"}}`
	}
	tests := []struct {
		name  string
		flood Flood
		// want is a substring of the refusal's message, or "" for a
		// response that must be accepted.
		want string
		kind provider.Kind
		// check checks an accepted response.
		check func(*provider.Response) error
	}{
		{name: "text past MaxResponseBytes", want: "8 MiB (provider.MaxResponseBytes)",
			flood: Flood{Parts: Cat(One(w.Head), Repeat(w.Text(chunk), endless/len(chunk)), One(w.Tail))}},
		{name: "text of exactly MaxResponseBytes",
			flood: Flood{Parts: Cat(One(w.Head), Repeat(w.Text(chunk), provider.MaxResponseBytes/len(chunk)), One(w.Tail))},
			check: func(r *provider.Response) error {
				if len(r.Text) != provider.MaxResponseBytes {
					return fmt.Errorf("text of %d bytes, want %d", len(r.Text), provider.MaxResponseBytes)
				}
				return nil
			}},
		{name: "the reported flood: 40 MiB of text and 5,000 tool calls", want: "8 MiB (provider.MaxResponseBytes)",
			flood: Flood{Parts: Cat(One(w.Head), Repeat(w.Text(chunk), 40*mib/len(chunk)), Calls(w, 0, 5000, `{}`), One(w.Tail))}},
		{name: "5,000 tool calls", want: "more than 1024 tool calls (provider.MaxToolCalls)",
			flood: Flood{Parts: Cat(One(w.Head), Calls(w, 0, 5000, `{}`), One(w.Tail))}},
		{name: "1025 tool calls", want: "more than 1024 tool calls (provider.MaxToolCalls)",
			flood: Flood{Parts: Cat(One(w.Head), Calls(w, 0, provider.MaxToolCalls+1, `{}`), One(w.Tail))}},
		{name: "1024 tool calls",
			flood: Flood{Parts: Cat(One(w.Head), Calls(w, 0, provider.MaxToolCalls, `{}`), One(w.Tail))},
			check: func(r *provider.Response) error {
				if len(r.ToolCalls) != provider.MaxToolCalls {
					return fmt.Errorf("%d tool calls, want %d", len(r.ToolCalls), provider.MaxToolCalls)
				}
				return nil
			}},
		{name: "arguments past MaxToolArgumentBytes", want: "1 MiB (provider.MaxToolArgumentBytes)",
			flood: Flood{Parts: Cat(One(w.Head, w.Call(0, overArgs...), w.Tail))}},
		{name: "arguments of exactly MaxToolArgumentBytes",
			flood: Flood{Parts: Cat(One(w.Head, w.Call(0, oneMiBArgs...), w.Tail))},
			check: func(r *provider.Response) error {
				if len(r.ToolCalls) != 1 || len(r.ToolCalls[0].Arguments) != provider.MaxToolArgumentBytes {
					return fmt.Errorf("calls %d, want one of %d bytes of arguments", len(r.ToolCalls), provider.MaxToolArgumentBytes)
				}
				return nil
			}},
		{name: "an event past sse.MaxEventSize", want: "1 MiB (sse.MaxEventSize)",
			flood: Flood{Parts: Cat(One(w.Head, w.Text(strings.Repeat("c", sse.MaxEventSize)), w.Tail))}},
		{name: "an event just under sse.MaxEventSize",
			flood: Flood{Parts: Cat(One(w.Head, w.Text(strings.Repeat("c", sse.MaxEventSize-kib)), w.Tail))},
			check: func(r *provider.Response) error {
				if len(r.Text) != sse.MaxEventSize-kib {
					return fmt.Errorf("text of %d bytes, want %d", len(r.Text), sse.MaxEventSize-kib)
				}
				return nil
			}},
		{name: "a line without end", want: "1 MiB (sse.MaxEventSize)",
			flood: Flood{Parts: Cat(One(w.Head, "data: "), Repeat(chunk, endless/len(chunk)))}},
		// An error body past its bound is not parsed and not read on;
		// the status still classifies it, because a load balancer's
		// long page on a 429 or a 503 is no reason to stop retrying.
		{name: "an error body past MaxErrorBody", want: "over 8 KiB (provider.MaxErrorBody) and not read", kind: provider.KindRateLimited,
			flood: Flood{Status: http.StatusTooManyRequests, ContentType: "application/json",
				Parts: Cat(One(`{"error":{"message":"`), Repeat(chunk, endless/len(chunk)))}},
		{name: "an error body within MaxErrorBody", want: "rate_limit_error: bbbb", kind: provider.KindRateLimited,
			flood: Flood{Status: http.StatusTooManyRequests, ContentType: "application/json",
				Parts: One(errorJSON(provider.MaxErrorBody - 64))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := NewFloodServer(t, tt.flood)
			p := open(t, srv.URL)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := p.Complete(context.Background(), &provider.Request{}, nil)
			runtime.ReadMemStats(&after)
			srv.Close() // waits for the handler, so Written is final
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want the response accepted", err)
				}
				if err := tt.check(resp); err != nil {
					t.Fatal(err)
				}
				return
			}
			pe := provider.AsError(err)
			kind := tt.kind
			if kind == "" {
				kind = provider.KindResponseTooLarge
			}
			if pe == nil || pe.Kind != kind {
				t.Fatalf("err = %v, want %s", err, kind)
			}
			if kind == provider.KindResponseTooLarge && pe.Transient() {
				t.Errorf("%s is transient; a flood must not be asked for again", pe.Kind)
			}
			if pe.Provider != p.Name() || !strings.Contains(pe.Message, tt.want) {
				t.Errorf("err = %v, want provider %q and %q in the message", err, p.Name(), tt.want)
			}
			if len(pe.Message) > 2*kib {
				t.Errorf("message of %d bytes", len(pe.Message))
			}
			if n := srv.Written(); n >= hungUp {
				t.Errorf("the server wrote %d MiB before the client hung up; want under %d MiB", n/mib, hungUp/mib)
			}
			// Text accumulates by appending, which costs about five times
			// its final size in all; a client that read the flood to its
			// end would allocate over a GiB.
			if a := after.TotalAlloc - before.TotalAlloc; a >= maxAlloc {
				t.Errorf("refusing allocated %d MiB; want under %d MiB", a/mib, maxAlloc/mib)
			}
			msg := pe.Message
			if len(msg) > 120 {
				msg = msg[:120] + "…"
			}
			t.Logf("refused after the server wrote %.1f MiB; %.1f MiB allocated: %s",
				float64(srv.Written())/mib, float64(after.TotalAlloc-before.TotalAlloc)/mib, msg)
		})
	}
}
