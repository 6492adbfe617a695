package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The SDK reads a stdio server's stdout line by line without a bound, and
// drops a line it cannot parse without a word, leaving the call it
// answered to wait out its deadline (research bugs M3 and M4). The framer
// sits between the server's stdout and the SDK: it passes on only lines
// of at most max bytes that are JSON-RPC messages, reports every other
// line as a fault, and answers a request whose answer it had to drop with
// an error of its own, so that the call fails at once with the reason.

// pending is the set of requests sent to a server and not yet answered,
// keyed by the JSON of their id. The stdin tap adds to it; the framer
// removes from it.
type pending struct {
	mu  sync.Mutex
	ids map[string]string // id → method
}

func newPending() *pending { return &pending{ids: map[string]string{}} }

func (p *pending) add(id, method string) {
	p.mu.Lock()
	p.ids[id] = method
	p.mu.Unlock()
}

// take removes id and reports whether it was pending.
func (p *pending) take(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.ids[id]
	delete(p.ids, id)
	return ok
}

func (p *pending) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.ids))
	for id := range p.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// tap is the server's stdin as the SDK writes it: it notes the id of
// every request that goes out, and bounds each write by a deadline when
// the stream supports one, so that a server that stopped reading fails a
// write instead of blocking it.
type tap struct {
	w       io.WriteCloser
	pending *pending
	timeout time.Duration
}

type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

func (t *tap) Write(b []byte) (int, error) {
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) == nil && m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" {
			t.pending.add(string(m.ID), m.Method)
		}
	}
	if d, ok := t.w.(writeDeadliner); ok && t.timeout > 0 {
		d.SetWriteDeadline(time.Now().Add(t.timeout))
	}
	n, err := t.w.Write(b)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("the server has not read its input for %s: %w", t.timeout, err)
	}
	return n, err
}

func (t *tap) Close() error { return t.w.Close() }

// fault is a frame the framer did not pass on.
type fault struct {
	// Kind is "oversize", "not_json", "not_jsonrpc" or "unknown_id".
	Kind string
	// Detail describes it, with a bounded preview of the line.
	Detail string
	// Failed are the ids of the requests the framer answered with an
	// error because of it.
	Failed []string
}

// framer copies JSON-RPC lines from a server's stdout to the SDK.
type framer struct {
	max     int
	pending *pending
	onFault func(fault)
}

const (
	// peekSize is how much of the head and of the tail of an oversize
	// line is kept to find the id it answers.
	peekSize = 1024
	// previewSize bounds the preview of a bad line in a fault.
	previewSize = 160
)

// run copies from r to w until r ends, then closes w with r's error.
func (f *framer) run(r io.Reader, w *io.PipeWriter) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	var head []byte
	tail := make([]byte, 0, 2*peekSize)
	var size int
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		switch {
		case over:
			tail = keepTail(tail, chunk)
		case size > f.max:
			over = true
			head = append(line[:0:0], line[:min(len(line), peekSize)]...)
			if len(head) < peekSize {
				head = append(head, chunk[:min(len(chunk), peekSize-len(head))]...)
			}
			tail = keepTail(append(tail[:0], line[max(0, len(line)-peekSize):]...), chunk)
			line = nil
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		complete := err == nil
		if over {
			f.oversize(w, head, tail, size)
		} else if len(bytes.TrimSpace(line)) > 0 && (complete || err == io.EOF) {
			f.frame(w, bytes.TrimRight(line, "\r\n"))
		}
		line, head, tail, size, over = line[:0], nil, tail[:0], 0, false
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			w.CloseWithError(err)
			return
		}
	}
}

func keepTail(tail, chunk []byte) []byte {
	tail = append(tail, chunk...)
	if len(tail) > peekSize {
		n := copy(tail, tail[len(tail)-peekSize:])
		tail = tail[:n]
	}
	return tail
}

// frame passes on one line, or reports it.
func (f *framer) frame(w io.Writer, line []byte) {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		f.report(fault{Kind: "not_json", Detail: "a line on stdout that is not JSON: " + preview(line)})
		return
	}
	id := string(m.ID)
	if id == "null" {
		id = ""
	}
	switch {
	case m.JSONRPC != "2.0":
		f.reject(w, id, "not_jsonrpc", `a message without "jsonrpc": "2.0"`, line)
		return
	case m.Method != nil:
		if *m.Method == "" {
			f.reject(w, id, "not_jsonrpc", "a message with an empty method", line)
			return
		}
		w.Write(append(line, '\n'))
		return
	case id == "":
		f.reject(w, "", "not_jsonrpc", "a message with neither a method nor an id", line)
		return
	case len(m.Result) == 0 && len(m.Error) == 0:
		f.reject(w, id, "not_jsonrpc", "a response with neither a result nor an error", line)
		return
	case len(m.Result) > 0 && len(m.Error) > 0:
		f.reject(w, id, "not_jsonrpc", "a response with both a result and an error", line)
		return
	}
	if !f.pending.take(id) {
		f.report(fault{Kind: "unknown_id", Detail: "a response to no request in flight (id " + previewString(id) + "): " + preview(line)})
		return
	}
	w.Write(append(line, '\n'))
}

// reject reports a malformed message and fails the request it answers, if
// that request is in flight.
func (f *framer) reject(w io.Writer, id, kind, what string, line []byte) {
	flt := fault{Kind: kind, Detail: what + ": " + preview(line)}
	if id != "" && f.pending.take(id) {
		flt.Failed = []string{id}
	}
	// The fault is on record before the call it fails returns.
	f.report(flt)
	if len(flt.Failed) > 0 {
		w.Write(errorFrame(id, "the server answered with a malformed message: "+what))
	}
}

var idPattern = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")`)

// oversize drops a line over the cap and fails the request it answers:
// the one pending id its head or tail names, or, when that cannot be told,
// every request in flight.
func (f *framer) oversize(w io.Writer, head, tail []byte, size int) {
	in := f.pending.list()
	var named []string
	for _, part := range [][]byte{head, tail} {
		for _, m := range idPattern.FindAllSubmatch(part, -1) {
			if contains(in, string(m[1])) && !contains(named, string(m[1])) {
				named = append(named, string(m[1]))
			}
		}
	}
	failed := in
	if len(named) == 1 {
		failed = named
	}
	msg := fmt.Sprintf("the server's answer is %d bytes or more, over the %d-byte output cap (max_output)", size, f.max)
	var taken []string
	for _, id := range failed {
		if f.pending.take(id) {
			taken = append(taken, id)
		}
	}
	// The fault is on record before the calls it fails return.
	f.report(fault{Kind: "oversize", Detail: fmt.Sprintf("a line of %d bytes or more on stdout, over the %d-byte cap; it starts: %s", size, f.max, preview(head)), Failed: taken})
	for _, id := range taken {
		w.Write(errorFrame(id, msg))
	}
}

func (f *framer) report(flt fault) {
	if f.onFault != nil {
		f.onFault(flt)
	}
}

// harnessCode is the JSON-RPC error code of the errors the framer makes.
const harnessCode = -32099

// errorFrame is a JSON-RPC error response to id, made by the harness.
func errorFrame(id, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id),
		"error": map[string]any{"code": harnessCode, "message": "io-harness: " + msg}})
	return append(b, '\n')
}

// preview returns at most previewSize bytes of b as valid, quoted text.
func preview(b []byte) string { return previewString(string(b)) }

func previewString(s string) string {
	cut := false
	if len(s) > previewSize {
		n := previewSize
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s, cut = s[:n], true
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	q := fmt.Sprintf("%q", s)
	if cut {
		q += "…"
	}
	return q
}

// ring keeps the last n bytes written to it.
type ring struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func (r *ring) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, b...)
	if len(r.buf) > r.n {
		r.buf = append(r.buf[:0], r.buf[len(r.buf)-r.n:]...)
	}
	return len(b), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := string(r.buf)
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
