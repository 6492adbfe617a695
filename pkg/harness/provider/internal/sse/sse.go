// Package sse reads a server-sent event stream, as the model APIs send it,
// from bytes.
//
// The reader follows the event-stream grammar of the HTML standard: lines
// end in "\n", "\r\n" or a lone "\r" (including a "\r" that ends one read
// and a "\n" that starts the next); lines starting with ":" are comments;
// several data lines are joined with "\n"; a blank line dispatches the
// event; an event without data is not dispatched. It frames lines on bytes
// and never decodes text, so a UTF-8 character split across reads reaches
// the caller whole.
//
// Two departures serve the model APIs. A field the standard does not know
// (llama.cpp's "error:" line) is kept in [Event.Fields], and an event that
// has such a field is dispatched even without data. At the end of the
// stream a pending event that lacks its blank line is discarded, except
// one whose data is exactly "[DONE]", which some servers send without it.
package sse

import (
	"bytes"
	"errors"
	"io"
)

// MaxEventSize is the largest line, event data or set of unknown field
// values of one event the reader accepts, in bytes: far above the 64 KiB
// of a default bufio.Scanner, which a whole tool call sent in one chunk
// can exceed, and four times the 256 KiB a model writing 64k tokens in
// one piece would need. The reader never buffers more than about this
// much, whatever the stream sends.
const MaxEventSize = 1 << 20

// MaxFields is the most unknown fields one event may have. It bounds the
// reader's bookkeeping as MaxEventSize bounds its bytes: a field with an
// empty value costs no bytes.
const MaxFields = 64

// ErrTooLarge is returned by [Reader.Next] when a line, the data of one
// event or its unknown fields exceed [MaxEventSize] or [MaxFields].
var ErrTooLarge = errors.New("sse: a line or an event over 1 MiB, or an event with over 64 unknown fields")

// done is the data of the terminator some servers send without its blank
// line.
const done = "[DONE]"

// maxLine is the longest line the reader buffers: a field name, a colon, a
// space and a value of MaxEventSize bytes.
const maxLine = MaxEventSize + 64

// initialSize is the reader's first buffer size; it grows as lines need.
const initialSize = 4 << 10

// Event is one dispatched event.
//
// Data and the values of Fields alias the reader's buffers: they are valid
// only until the next call of [Reader.Next].
type Event struct {
	// Type is the value of the event's "event" field, or "" when it had
	// none.
	Type string
	// Data is the event's data lines joined with "\n".
	Data []byte
	// Fields are the lines whose field name the standard does not define,
	// in order.
	Fields []Field
}

// Field is one line of an unknown field.
type Field struct {
	Name  string
	Value []byte
}

// Reader reads events from a byte stream. It buffers its input, so it may
// read past the last event it returns.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	rd  io.Reader
	err error // the sticky error of rd, returned once the buffer is used up

	buf        []byte
	start, end int  // buf[start:end] is unread input
	scanned    int  // bytes of buf[start:end] known to hold no line end
	skipLF     bool // the last line ended in "\r": a leading "\n" belongs to it
	began      bool // the byte order mark was checked

	// The pending event.
	typ     string
	data    []byte
	hasData bool
	unknown []field  // unknown fields, their values stored in extra
	extra   []byte   // the values of unknown, back to back
	fields  []Field  // the Fields of the last event returned
	types   []string // event types seen, reused so that a repeated type does not allocate
}

// field is an unknown field of the pending event; its value ends at
// extra[end], and starts where the previous one ends.
type field struct {
	name string
	end  int
}

// NewReader returns a reader of the event stream r.
func NewReader(r io.Reader) *Reader {
	return &Reader{rd: r}
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// when the underlying reader fails it returns that error, and when an
// event is too large, [ErrTooLarge]. After an error every call returns the
// same error.
func (r *Reader) Next() (Event, error) {
	r.typ, r.data, r.hasData, r.unknown, r.extra = "", r.data[:0], false, r.unknown[:0], r.extra[:0]
	for {
		line, err := r.line()
		if err != nil {
			if err == io.EOF && r.hasData && string(r.data) == done {
				return r.event(), nil
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if len(r.data) > 0 || len(r.unknown) > 0 {
				return r.event(), nil
			}
			r.typ, r.hasData = "", false
			continue
		}
		if line[0] == ':' {
			continue
		}
		if err := r.field(line); err != nil {
			return Event{}, err
		}
	}
}

// field applies one non-blank, non-comment line to the pending event.
func (r *Reader) field(line []byte) error {
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		sep := 0
		if r.hasData {
			sep = 1
		}
		if len(r.data)+sep+len(value) > MaxEventSize {
			return r.fail(ErrTooLarge)
		}
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.typ = r.intern(value)
	case "id", "retry":
		// The reader never reconnects, so neither field has a use.
	default:
		if len(r.extra)+len(value) > MaxEventSize || len(r.unknown) >= MaxFields {
			return r.fail(ErrTooLarge)
		}
		r.extra = append(r.extra, value...)
		r.unknown = append(r.unknown, field{name: string(name), end: len(r.extra)})
	}
	return nil
}

// event returns the pending event.
func (r *Reader) event() Event {
	r.hasData = false
	if len(r.unknown) == 0 {
		return Event{Type: r.typ, Data: r.data}
	}
	r.fields = r.fields[:0]
	from := 0
	for _, f := range r.unknown {
		r.fields = append(r.fields, Field{Name: f.name, Value: r.extra[from:f.end:f.end]})
		from = f.end
	}
	return Event{Type: r.typ, Data: r.data, Fields: r.fields}
}

// intern returns b as a string, reusing an earlier string with the same
// bytes so that the handful of event types a stream repeats do not
// allocate on every event.
func (r *Reader) intern(b []byte) string {
	for _, s := range r.types {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	if len(r.types) < 16 {
		r.types = append(r.types, s)
	}
	return s
}

// fail records err as sticky and returns it.
func (r *Reader) fail(err error) error {
	r.err = err
	r.start, r.end, r.scanned = 0, 0, 0
	return err
}

// line returns the next line without its ending. The line aliases the
// buffer and is valid until the next call. A last line that lacks an
// ending is returned when the input ends; after it, line returns the
// input's error (io.EOF at a clean end).
func (r *Reader) line() ([]byte, error) {
	for {
		if r.skipLF && r.start < r.end {
			r.skipLF = false
			if r.buf[r.start] == '\n' {
				r.start++
			}
		}
		if !r.began {
			r.checkBOM()
		}
		if r.began {
			b := r.buf[r.start:r.end]
			if i := eol(b, r.scanned); i >= 0 {
				line := b[:i]
				n := i + 1
				if b[i] == '\r' {
					if n < len(b) {
						if b[n] == '\n' {
							n++
						}
					} else {
						r.skipLF = true
					}
				}
				r.start += n
				r.scanned = 0
				return line, nil
			}
			r.scanned = len(b)
		}
		if r.err != nil {
			if r.start < r.end {
				line := r.buf[r.start:r.end]
				r.start, r.scanned = r.end, 0
				return line, nil
			}
			return nil, r.err
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// checkBOM drops a UTF-8 byte order mark at the start of the stream, once
// enough input has arrived to tell.
func (r *Reader) checkBOM() {
	const bom = "\xef\xbb\xbf"
	b := r.buf[r.start:r.end]
	n := min(len(b), len(bom))
	switch {
	case string(b[:n]) != bom[:n]:
		r.began = true
	case n == len(bom):
		r.began = true
		r.start += n
	case r.err != nil:
		r.began = true
	}
}

// eol returns the index of the first "\r" or "\n" in b at or after from,
// or -1.
func eol(b []byte, from int) int {
	rest := b[from:]
	i := bytes.IndexByte(rest, '\n')
	head := rest
	if i >= 0 {
		head = rest[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return from + j
	}
	if i >= 0 {
		return from + i
	}
	return -1
}

// fill reads more input into the buffer, compacting or growing it first.
// It returns an error only when a line would exceed MaxEventSize; a read
// error is recorded in r.err.
func (r *Reader) fill() error {
	if r.start > 0 && (r.start == r.end || r.end == len(r.buf)) {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		if len(r.buf) >= maxLine {
			return r.fail(ErrTooLarge)
		}
		size := min(max(2*len(r.buf), initialSize), maxLine)
		nb := make([]byte, size)
		copy(nb, r.buf[r.start:r.end])
		r.buf, r.end, r.start = nb, r.end-r.start, 0
	}
	for range 100 {
		n, err := r.rd.Read(r.buf[r.end:])
		r.end += n
		if err != nil {
			r.err = err
			return nil
		}
		if n > 0 {
			return nil
		}
	}
	r.err = io.ErrNoProgress
	return nil
}
