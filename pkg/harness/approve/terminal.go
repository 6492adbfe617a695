package approve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

// Terminal asks a person at a terminal: it prints the action, the rule
// that asked, and for a write the diff of the change, then reads one
// answer line:
//
//	y  approve once
//	a  approve, and remember an allow rule for exactly this target
//	n  deny (the rest of the line, if any, is the reason)
//	d  defer: end the run awaiting a decision from elsewhere
//
// Any other answer is asked again. At the end of input it denies.
type Terminal struct {
	in  io.Reader
	out io.Writer

	mu    sync.Mutex // one question at a time
	once  sync.Once
	lines chan line // answers, read by one goroutine until the input ends

	question  atomic.Int64 // the number of the question being asked, or last asked
	wmu       sync.Mutex   // guards withdrawn
	withdrawn map[int64]bool
}

// line is one line of input and the question being asked when it was read.
type line struct {
	text     string
	question int64
}

// NewTerminal returns an approver that reads answers from in and writes
// questions to out (typically os.Stdin and os.Stderr).
//
// Reading is done by one goroutine the Terminal owns; it ends when in
// reports the end of input or an error. A Decide whose context ends while
// it waits returns at once, and a line read while that question was asked
// is discarded: an answer typed for a withdrawn question never answers
// the next one.
func NewTerminal(in io.Reader, out io.Writer) *Terminal {
	return &Terminal{in: in, out: out}
}

func (t *Terminal) read() {
	defer close(t.lines)
	tr := &taggedReader{r: t.in, t: t}
	sc := bufio.NewScanner(tr)
	for sc.Scan() {
		t.lines <- line{text: sc.Text(), question: tr.question}
	}
}

// taggedReader notes which question was being asked when input last
// arrived, so that a line is judged by when it was typed, not by when it
// was split off.
type taggedReader struct {
	r        io.Reader
	t        *Terminal
	question int64
}

func (tr *taggedReader) Read(p []byte) (int, error) {
	n, err := tr.r.Read(p)
	if n > 0 {
		tr.question = tr.t.question.Load()
	}
	return n, err
}

// Decide implements Approver.
func (t *Terminal) Decide(ctx context.Context, req *Request) (Decision, error) {
	t.once.Do(func() {
		t.lines = make(chan line)
		t.withdrawn = map[int64]bool{}
		go t.read()
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.question.Add(1)
	fmt.Fprint(t.out, describe(req))
	for {
		fmt.Fprint(t.out, "approve? [y]es, [a]lways for this target, [n]o [reason], [d]efer: ")
		var l line
		var ok bool
		for {
			select {
			case <-ctx.Done():
				t.wmu.Lock()
				t.withdrawn[q] = true
				t.wmu.Unlock()
				fmt.Fprintln(t.out)
				return Decision{}, ctx.Err()
			case l, ok = <-t.lines:
			}
			t.wmu.Lock()
			stale := t.withdrawn[l.question]
			t.wmu.Unlock()
			if !ok || !stale {
				break
			}
		}
		if !ok {
			fmt.Fprintln(t.out)
			return Decision{Kind: Deny, Reason: "no answer: the terminal's input ended"}, nil
		}
		answer, rest, _ := strings.Cut(strings.TrimSpace(l.text), " ")
		switch strings.ToLower(answer) {
		case "y", "yes":
			return Decision{Kind: Approve}, nil
		case "a", "always":
			return Decision{Kind: Approve, Remember: []policy.Rule{{Act: req.Act, Effect: policy.Allow, Pattern: policy.Literal(req.Act, req.Target)}}}, nil
		case "n", "no":
			reason := strings.TrimSpace(rest)
			if reason == "" {
				reason = "denied at the terminal"
			}
			return Decision{Kind: Deny, Reason: reason}, nil
		case "d", "defer":
			return Decision{Kind: Defer}, nil
		}
	}
}

// describe renders a request for a person.
func describe(req *Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n── approval needed ── %s %s", req.Act, req.Target)
	if req.Tool != "" {
		fmt.Fprintf(&b, " (by %s)", req.Tool)
	}
	b.WriteString("\n")
	if req.Rule != "" {
		fmt.Fprintf(&b, "asked by rule %q in layer %q\n", req.Rule, req.Layer)
	} else {
		fmt.Fprintf(&b, "asked by the %s default\n", req.Act)
	}
	if req.Shown != "" {
		b.WriteString(req.Shown)
		if !strings.HasSuffix(req.Shown, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
