package tree

import (
	"sync"

	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// Workspace is the write history of a workspace that a tree's agents
// share, kept to tell each agent when a write of its would lose another
// agent's. Each agent writes through its own view ([Workspace.Agent]).
type Workspace struct {
	mu    sync.Mutex
	gen   uint64
	files map[string]*file
}

// file is one file's last write.
type file struct {
	mu  sync.Mutex // held across a write's check and its end
	gen uint64     // the mark of its last write
	by  string     // the agent that made it
}

// NewWorkspace returns a workspace with no recorded writes.
func NewWorkspace() *Workspace { return &Workspace{files: map[string]*file{}} }

// Wrote records that agent wrote p, as a resumed tree rebuilds the history
// from its committed steps, in the order they committed.
func (w *Workspace) Wrote(p, agent string) {
	f := w.file(p)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen, f.by = w.next(), agent
}

func (w *Workspace) file(p string) *file {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, ok := w.files[p]
	if !ok {
		f = &file{}
		w.files[p] = f
	}
	return f
}

func (w *Workspace) next() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	return w.gen
}

// Agent returns the view of the agent at path: a [tool.Files] for its
// tool calls.
func (w *Workspace) Agent(path string) tool.Files {
	return &view{w: w, agent: path, seen: map[string]uint64{}}
}

// view is one agent's tool.Files.
type view struct {
	w     *Workspace
	agent string
	mu    sync.Mutex
	seen  map[string]uint64 // file → the mark at which the agent last saw it
}

func (v *view) Mark() uint64 {
	v.w.mu.Lock()
	defer v.w.mu.Unlock()
	return v.w.gen
}

func (v *view) Saw(p string, at uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if at > v.seen[p] {
		v.seen[p] = at
	}
}

func (v *view) Write(p string, since uint64, write func() error) error {
	f := v.w.file(p)
	f.mu.Lock()
	defer f.mu.Unlock()
	if since == 0 {
		v.mu.Lock()
		since = v.seen[p]
		v.mu.Unlock()
	}
	if f.by != "" && f.by != v.agent && f.gen > since {
		return &tool.ConflictError{Path: p, By: f.by}
	}
	if err := write(); err != nil {
		return err
	}
	f.gen, f.by = v.w.next(), v.agent
	v.Saw(p, f.gen)
	return nil
}
