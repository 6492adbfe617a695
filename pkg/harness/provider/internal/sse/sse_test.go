package sse_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/sse"
)

// ev is an [sse.Event] copied out of the reader's buffers.
type ev struct {
	Type   string
	Data   string
	Fields [][2]string // name, value
}

// readAll returns every event of the stream and the error that ended it
// (nil for io.EOF).
func readAll(r io.Reader) ([]ev, error) {
	sr := sse.NewReader(r)
	var out []ev
	for {
		e, err := sr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		c := ev{Type: e.Type, Data: string(e.Data)}
		for _, f := range e.Fields {
			c.Fields = append(c.Fields, [2]string{f.Name, string(f.Value)})
		}
		out = append(out, c)
	}
}

// chunked returns a reader that hands out src in pieces ending at the
// given offsets.
type chunked struct {
	src  []byte
	cuts []int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := len(c.src)
	if len(c.cuts) > 0 {
		n = c.cuts[0]
		c.cuts = c.cuts[1:]
	}
	n = min(n, len(p), len(c.src))
	copy(p, c.src[:n])
	c.src = c.src[n:]
	return n, nil
}

// randomCuts splits n bytes into pieces of 1 to 7 bytes.
func randomCuts(rng *rand.Rand, n int) []int {
	var cuts []int
	for n > 0 {
		k := min(1+rng.IntN(7), n)
		cuts = append(cuts, k)
		n -= k
	}
	return cuts
}

func TestReader(t *testing.T) {
	big := strings.Repeat("é", 400<<10) // 800 KiB of two-byte characters
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"lf", "data: a\n\ndata: b\n\n", []ev{{Data: "a"}, {Data: "b"}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{{Data: "a"}, {Data: "b"}}},
		{"lone cr", "data: a\r\rdata: b\r\r", []ev{{Data: "a"}, {Data: "b"}}},
		{"mixed endings", "event: x\rdata: a\r\n\ndata: b\n\r", []ev{{Type: "x", Data: "a"}, {Data: "b"}}},
		{"event type", "event: message_stop\ndata: {}\n\n", []ev{{Type: "message_stop", Data: "{}"}}},
		{"type resets after dispatch", "event: a\ndata: 1\n\ndata: 2\n\n", []ev{{Type: "a", Data: "1"}, {Data: "2"}}},
		{"comments and keep-alives", ": OPENROUTER PROCESSING\n\n:\n\ndata: a\n: ping\n\n", []ev{{Data: "a"}}},
		{"multi-line data", "data: {\ndata: \"foo\":\ndata: true}\n\n", []ev{{Data: "{\n\"foo\":\ntrue}"}}},
		{"one space stripped", "data:  two\n\ndata:none\n\n", []ev{{Data: " two"}, {Data: "none"}}},
		{"event without data skipped", "event: ping\n\nretry: 3000\n\nid: 7\n\ndata: a\n\n", []ev{{Data: "a"}}},
		{"empty data skipped", "data:\n\ndata\n\n", nil},
		{"two empty data lines", "data:\ndata:\n\n", []ev{{Data: "\n"}}},
		{"unknown field surfaced", "error: {\"code\":400}\n\ndata: [DONE]\n\n", []ev{{Fields: [][2]string{{"error", `{"code":400}`}}}, {Data: "[DONE]"}}},
		{"unknown fields with data", "x: 1\ny\ndata: d\n\n", []ev{{Data: "d", Fields: [][2]string{{"x", "1"}, {"y", ""}}}}},
		{"done without blank line", "data: a\n\ndata: [DONE]\n", []ev{{Data: "a"}, {Data: "[DONE]"}}},
		{"done without line end", "data: a\n\ndata: [DONE]", []ev{{Data: "a"}, {Data: "[DONE]"}}},
		{"pending event discarded", "data: a\n\nevent: message_stop\ndata: {}\n", []ev{{Data: "a"}}},
		{"byte order mark", "\xef\xbb\xbfdata: a\n\n", []ev{{Data: "a"}}},
		{"unicode line separators kept", "data: a\u2028b\u2029c\u0085d\n\n", []ev{{Data: "a\u2028b\u2029c\u0085d"}}},
		{"multi-byte text", "data: 22°C известни\n\n", []ev{{Data: "22°C известни"}}},
		{"event far over 64 KiB", "data: " + big + "\n\ndata: x\n\n", []ev{{Data: big}, {Data: "x"}}},
		{"empty stream", "", nil},
		{"blank lines only", "\n\r\n\r\r\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("whole input (-want +got):\n%s", diff)
			}
			got, err = readAll(iotest.OneByteReader(strings.NewReader(tt.in)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("one byte at a time (-want +got):\n%s", diff)
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(tt.in))))
			for range 20 {
				got, err = readAll(&chunked{src: []byte(tt.in), cuts: randomCuts(rng, len(tt.in))})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Fatalf("random splits (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestReaderCRAtEndOfRead(t *testing.T) {
	// The "\r" ends one read and the "\n" starts the next: one line end,
	// not two, so the event is not dispatched early with the type lost.
	in := "event: e\r\ndata: a\r\n\r\n"
	for cut := 1; cut < len(in); cut++ {
		got, err := readAll(&chunked{src: []byte(in), cuts: []int{cut}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ev{{Type: "e", Data: "a"}}, got); diff != "" {
			t.Fatalf("cut at %d (-want +got):\n%s", cut, diff)
		}
	}
}

// TestReaderTooLarge crosses each bound of the reader by one, and stops
// exactly at it as the control.
func TestReaderTooLarge(t *testing.T) {
	fields := func(n int) string { return strings.Repeat("x\n", n) + "data: a\n\n" }
	tests := []struct {
		name  string
		in    string
		large bool
	}{
		{"one line of MaxEventSize", "data: " + strings.Repeat("x", sse.MaxEventSize) + "\n\n", false},
		{"one line past MaxEventSize", "data: " + strings.Repeat("x", sse.MaxEventSize+1) + "\n\n", true},
		{"a line with no end past MaxEventSize", "data: " + strings.Repeat("x", sse.MaxEventSize+100), true},
		{"a comment past MaxEventSize", ":" + strings.Repeat("x", sse.MaxEventSize+100) + "\ndata: a\n\n", true},
		{"two data lines of MaxEventSize in all", "data: " + strings.Repeat("x", sse.MaxEventSize/2) + "\ndata: " + strings.Repeat("x", sse.MaxEventSize/2-1) + "\n\n", false},
		{"two data lines past MaxEventSize in all", "data: " + strings.Repeat("x", sse.MaxEventSize/2) + "\ndata: " + strings.Repeat("x", sse.MaxEventSize/2) + "\n\n", true},
		{"unknown fields of MaxEventSize", "a: " + strings.Repeat("x", sse.MaxEventSize/2) + "\nb: " + strings.Repeat("x", sse.MaxEventSize/2) + "\n\n", false},
		{"unknown fields past MaxEventSize", "a: " + strings.Repeat("x", sse.MaxEventSize/2) + "\nb: " + strings.Repeat("x", sse.MaxEventSize/2+1) + "\n\n", true},
		{"MaxFields empty unknown fields", fields(sse.MaxFields), false},
		{"empty unknown fields past MaxFields", fields(sse.MaxFields + 1), true},
		{"a million empty unknown fields", fields(1 << 20), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readAll(strings.NewReader(tt.in))
			if got := errors.Is(err, sse.ErrTooLarge); got != tt.large {
				t.Fatalf("err = %v; want ErrTooLarge %v", err, tt.large)
			}
			if !tt.large && err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
	got, err := readAll(r)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if diff := cmp.Diff([]ev{{Data: "a"}}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// serialize writes events back as an event stream with the given line
// end, with a comment after each event, so that a re-read must give the
// same events.
func serialize(events []ev, eol string) []byte {
	var b bytes.Buffer
	for _, e := range events {
		if e.Type != "" {
			b.WriteString("event: " + e.Type + eol)
		}
		for _, f := range e.Fields {
			b.WriteString(f[0] + ": " + f[1] + eol)
		}
		if e.Data != "" || len(e.Fields) == 0 {
			for _, line := range strings.Split(e.Data, "\n") {
				b.WriteString("data: " + line + eol)
			}
		}
		b.WriteString(eol + ": keep-alive" + eol + eol)
	}
	return b.Bytes()
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: [DONE]\n\n"), uint64(1))
	f.Add([]byte("event: message_start\r\ndata: {\"x\":\"°\"}\r\n\r\n: ping\r\rdata: b\r"), uint64(2))
	f.Add([]byte("error: {\"code\":400}\n\ndata: {\ndata: }\n\nx\n\n"), uint64(3))
	f.Add([]byte("\xef\xbb\xbfdata:  a\u2028\n\ndata: [DONE]"), uint64(4))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		want, wantErr := readAll(bytes.NewReader(in))
		if wantErr != nil && !errors.Is(wantErr, sse.ErrTooLarge) {
			t.Fatalf("err = %v; a reader that never fails can only give ErrTooLarge", wantErr)
		}
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		got, err := readAll(&chunked{src: in, cuts: randomCuts(rng, len(in))})
		if !errors.Is(err, wantErr) {
			t.Fatalf("split input: err = %v, whole: %v", err, wantErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("split input (-whole +split):\n%s", diff)
		}
		if wantErr != nil {
			return // over MaxFields: the events before it are checked above
		}
		for _, eol := range []string{"\n", "\r\n", "\r"} {
			re := serialize(want, eol)
			got, err := readAll(&chunked{src: re, cuts: randomCuts(rng, len(re))})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("re-framed with %q (-first +re-framed):\n%s", eol, diff)
			}
		}
	})
}
