package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The step task every arm plays: a fake chat model answers each turn at
// once, turn k (0 ≤ k < n) with one write_file call that writes
// f<k+1>.txt, and turn n with a final answer and no call. A run is
// therefore n steps that each write a file and one answering turn: n+1
// model turns, which is what a per-step figure divides by.

// writeFileName is the one tool the task needs.
const writeFileName = "write_file"

// writeFileDesc describes write_file to the peers' models.
const writeFileDesc = "Write a whole file in the workspace: create it or replace its content."

// script is the task of n steps: the same turns, in the vocabulary of no
// arm, for every arm to play.
type script struct {
	n     int
	goal  string
	turns []turn // n calls, then the answer
}

// turn is one model turn of a script.
type turn struct {
	id   string // the call's id; "" for the answering turn
	args string // write_file's arguments, JSON
	text string // the answer's text; "" for a call
}

// Token counts every fake model reports for every turn, so that no arm
// estimates usage from the request (a cost that would grow with the
// history and belongs to no framework).
const (
	turnInputTokens  = 100
	turnOutputTokens = 20
)

// newScript returns the task of n steps.
func newScript(n int) *script {
	s := &script{n: n, goal: fmt.Sprintf("Write the files f1.txt to f%d.txt with write_file, one a step, then say done.", n)}
	for k := 1; k <= n; k++ {
		args, _ := json.Marshal(writeArgs{Path: fileName(k), Content: fileContent(k)})
		s.turns = append(s.turns, turn{id: fmt.Sprintf("call_%d", k), args: string(args)})
	}
	s.turns = append(s.turns, turn{text: fmt.Sprintf("done: wrote %d files", n)})
	return s
}

// answer is the text of the script's last turn.
func (s *script) answer() string { return s.turns[s.n].text }

func fileName(k int) string    { return fmt.Sprintf("f%d.txt", k) }
func fileContent(k int) string { return fmt.Sprintf("file %d of the step benchmark\n", k) }

// writeArgs are write_file's arguments.
type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// play is one run of a script by one arm: it carries, in the run's
// context, what the arm's fake model and write_file need. The fakes are
// built once per arm and play many runs, as an embedder would reuse them.
type play struct {
	s    *script
	dir  string
	root *os.Root // opened by the arms whose write_file is ours

	next int         // the turn the model plays next
	at   []time.Time // at[k]: when turn k was asked for

	// err is the first error of the model's checks, kept because an arm
	// may report it only in words.
	err error

	// noWrite makes write_file report a write it did not make: the
	// negative control of checkWorkspace.
	noWrite bool
}

func newPlay(s *script, dir string) *play {
	return &play{s: s, dir: dir, at: make([]time.Time, s.n+1)}
}

type playKey struct{}

func withPlay(ctx context.Context, p *play) context.Context {
	return context.WithValue(ctx, playKey{}, p)
}

// playOf returns the play of ctx, or nil.
func playOf(ctx context.Context) *play {
	p, _ := ctx.Value(playKey{}).(*play)
	return p
}

// errHistory is the error of a model asked for a turn without the run's
// whole history: the arm dropped or folded part of it, and is not doing
// the work the others do.
var errHistory = errors.New("history")

// turn is the fake model's answer to a request of msgs messages whose
// last tool result (among its final three messages) answers lastCall,
// offering write_file or not. Every arm's fake model calls it, so that
// all play the same turns under the same checks: the tool is offered; the
// request of turn k > 0 holds at least 2k+1 messages (the task, and k
// calls with their results) and ends with the result of call k-1.
func (p *play) turn(msgs int, lastCall string, offered bool) (*turn, error) {
	t, err := p.turnChecked(msgs, lastCall, offered)
	if err != nil && p.err == nil {
		p.err = err
	}
	return t, err
}

func (p *play) turnChecked(msgs int, lastCall string, offered bool) (*turn, error) {
	k := p.next
	p.next++
	if k > p.s.n {
		return nil, fmt.Errorf("fake model: asked for turn %d of a script of %d", k+1, p.s.n+1)
	}
	p.at[k] = time.Now()
	if !offered {
		return nil, fmt.Errorf("fake model: turn %d: write_file is not offered", k+1)
	}
	if k > 0 {
		if msgs < 2*k+1 {
			return nil, fmt.Errorf("fake model: turn %d: %w: the request holds %d messages, at least %d expected", k+1, errHistory, msgs, 2*k+1)
		}
		if want := p.s.turns[k-1].id; lastCall != want {
			return nil, fmt.Errorf("fake model: turn %d: %w: the request ends with the result of %q, not of %q", k+1, errHistory, lastCall, want)
		}
	}
	return &p.s.turns[k], nil
}

// write is the peers' write_file: it writes the file its arguments name
// in the play's workspace, confined to it by an os.Root.
func (p *play) write(args string) (string, error) {
	var a writeArgs
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return "", fmt.Errorf("write_file: arguments: %w", err)
	}
	if !p.noWrite {
		if err := p.root.WriteFile(a.Path, []byte(a.Content), 0o644); err != nil {
			return "", fmt.Errorf("write_file: %w", err)
		}
	}
	return fmt.Sprintf("wrote %s (%d bytes)", a.Path, len(a.Content)), nil
}

// open opens the play's workspace for write.
func (p *play) open() error {
	r, err := os.OpenRoot(p.dir)
	p.root = r
	return err
}

// close closes what open opened.
func (p *play) close() {
	if p.root != nil {
		p.root.Close()
		p.root = nil
	}
}

// check says whether the play did the whole task: every turn asked for,
// the script's answer returned, and every file written with its content
// and no other f*.txt.
func (p *play) check(answer string) error {
	if p.next != p.s.n+1 {
		return fmt.Errorf("the model was asked for %d turns, not %d", p.next, p.s.n+1)
	}
	if answer != p.s.answer() {
		return fmt.Errorf("the answer is %q, not %q", answer, p.s.answer())
	}
	return checkWorkspace(p.dir, p.s.n)
}

// checkWorkspace says whether dir holds f1.txt to f<n>.txt with their
// content, and no other f*.txt.
func checkWorkspace(dir string, n int) error {
	for k := 1; k <= n; k++ {
		b, err := os.ReadFile(filepath.Join(dir, fileName(k)))
		if err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		if string(b) != fileContent(k) {
			return fmt.Errorf("workspace: %s holds %q, not %q", fileName(k), b, fileContent(k))
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	files := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "f") && strings.HasSuffix(e.Name(), ".txt") {
			files++
		}
	}
	if files != n {
		return fmt.Errorf("workspace: %d files f*.txt, not %d", files, n)
	}
	return nil
}
