// Package wiretest is the test support of the vendor packages: a local
// server that answers with scripted event streams, byte for byte or with
// transport faults, records what it was sent, and the recorded fixtures
// shared beside the repository, and helpers the vendor tests share.
package wiretest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// FixtureDir returns the folder of recorded provider streams,
// shared/fixtures/providers beside the repository, or skips t saying that
// it is missing.
func FixtureDir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// Walk up to the module root (the folder with go.mod), whose parent
	// holds shared/.
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			fixtures := filepath.Join(filepath.Dir(dir), "shared", "fixtures", "providers")
			if fi, err := os.Stat(fixtures); err == nil && fi.IsDir() {
				return fixtures
			}
			t.Skipf("recorded provider fixtures not found at %s: skipping the conformance replay", fixtures)
		}
		if filepath.Dir(dir) == dir {
			t.Skipf("no go.mod above %s, so no fixtures folder beside it: skipping the conformance replay", wd)
		}
	}
}

// Fault is how a [Reply] body is damaged or delivered.
type Fault struct {
	// OneByte writes the body one byte per write, flushing each, so
	// every line end and every multi-byte character is split across
	// reads.
	OneByte bool
	// Split writes the body in random pieces of 1 to 64 bytes, flushing
	// each; Seed picks the pieces.
	Split bool
	Seed  uint64
	// CRLF turns every "\n" of the body into "\r\n".
	CRLF bool
	// KeepAlive puts a comment line between events.
	KeepAlive bool
	// CutAt, when positive, aborts the connection after that many bytes
	// of the (transformed) body.
	CutAt int
	// StallAt, when positive, stops writing after that many bytes and
	// holds the connection open until the client gives up.
	StallAt int
}

// Reply is one scripted response.
type Reply struct {
	Status int // 0 means 200
	Header map[string]string
	Body   []byte
	Fault  Fault
}

// SSE returns a 200 event-stream reply with body.
func SSE(body string) Reply {
	return Reply{Header: map[string]string{"Content-Type": "text/event-stream; charset=utf-8"}, Body: []byte(body)}
}

// JSON returns a reply with a JSON body and the given status.
func JSON(status int, body string) Reply {
	return Reply{Status: status, Header: map[string]string{"Content-Type": "application/json"}, Body: []byte(body)}
}

// Request is a request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Server answers each request with the next scripted reply, and the last
// one again when the script runs out.
type Server struct {
	*httptest.Server

	mu       sync.Mutex // guards replies and requests
	replies  []Reply
	requests []Request
}

// NewServer starts a server that answers with replies in order. It is
// closed when the test ends.
func NewServer(t testing.TB, replies ...Reply) *Server {
	s := &Server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	var reply Reply
	if len(s.replies) > 0 {
		reply = s.replies[0]
		if len(s.replies) > 1 {
			s.replies = s.replies[1:]
		}
	}
	s.mu.Unlock()

	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	f := reply.Fault
	out := Transform(reply.Body, f)
	if f.StallAt > 0 && f.StallAt < len(out) {
		write(w, out[:f.StallAt], f)
		<-r.Context().Done()
		return
	}
	if f.CutAt > 0 && f.CutAt < len(out) {
		write(w, out[:f.CutAt], f)
		panic(http.ErrAbortHandler) // closes the connection mid-body
	}
	write(w, out, f)
}

// write writes b, in pieces when the fault asks for it.
func write(w http.ResponseWriter, b []byte, f Fault) {
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	switch {
	case f.OneByte:
		for i := range b {
			w.Write(b[i : i+1])
			flush()
		}
	case f.Split:
		for _, piece := range Pieces(b, f.Seed) {
			w.Write(piece)
			flush()
		}
	default:
		w.Write(b)
	}
	flush()
}

// Pieces cuts b into pieces of 1 to 64 bytes chosen by seed.
func Pieces(b []byte, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out [][]byte
	for len(b) > 0 {
		n := min(1+rng.IntN(64), len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// Transform applies the CRLF and KeepAlive faults to a body.
func Transform(b []byte, f Fault) []byte {
	if f.KeepAlive {
		b = bytes.ReplaceAll(b, []byte("\n\n"), []byte("\n\n: keep-alive\n\n"))
		b = append([]byte(": keep-alive\n\n"), b...)
	}
	if f.CRLF {
		b = bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
	}
	return b
}

// Faults are the delivery variants a byte-exact stream must survive
// unchanged.
func Faults() map[string]Fault {
	return map[string]Fault{
		"whole":              {},
		"one byte per write": {OneByte: true},
		"random splits":      {Split: true, Seed: 1},
		"crlf split":         {CRLF: true, Split: true, Seed: 2},
		"crlf one byte":      {CRLF: true, OneByte: true},
		"keep-alives":        {KeepAlive: true, Split: true, Seed: 3},
	}
}

// Short is a stall timeout for tests: long enough for a loaded machine
// to deliver a local stream, short enough to keep the test quick.
const Short = 300 * time.Millisecond

// Complete runs one turn of p and checks that the text deltas add up to
// the response's text.
func Complete(t testing.TB, p provider.Provider, req *provider.Request) (*provider.Response, error) {
	t.Helper()
	var deltas strings.Builder
	resp, err := p.Complete(context.Background(), req, func(s string) { deltas.WriteString(s) })
	if err == nil && deltas.String() != resp.Text {
		t.Errorf("text deltas %q, response text %q", deltas.String(), resp.Text)
	}
	return resp, err
}

// JSONOf decodes JSON for a comparison that ignores key order.
func JSONOf(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}
