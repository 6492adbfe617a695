package tool

import (
	"context"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sync"
	"sync/atomic"
)

// walkBatch is how many files of one directory make one task of a walk.
const walkBatch = 32

// dirNode is a directory open during a walk. Its root is closed when the
// last task that needs it is done.
type dirNode struct {
	root *os.Root
	rel  string // the directory's slash path from the workspace root
	refs atomic.Int32
}

func (d *dirNode) acquire() { d.refs.Add(1) }

func (d *dirNode) release() {
	if d.refs.Add(-1) == 0 {
		d.root.Close()
	}
}

// walkTask is one unit of work of a walk: a directory to read, or a batch
// of files of a directory. Each task holds one reference to dir.
type walkTask struct {
	dir   *dirNode      // the directory of the files, or the parent of name
	name  string        // a directory of dir to read; empty: read dir itself
	files []fs.DirEntry // the files of dir to visit, for a file batch
	isDir bool
}

// walkFuncs are what a walk calls. worker is the index of the worker
// goroutine that calls, in [0, workers), so that callers can keep state
// per worker without locks. Both may be called concurrently.
type walkFuncs struct {
	// dir, when not nil, is given the entries of each directory, in
	// directory order; rel is the directory's workspace path.
	dir func(worker int, rel string, ents []fs.DirEntry)
	// file, when not nil, is called for each regular file, which it opens
	// by name with d.root. The entry's Info is cheap: a directory read in
	// a Root has its entries' Lstat already done.
	file func(worker int, d *dirNode, e fs.DirEntry)
}

// walker walks a directory tree with a pool of goroutines. Directories
// named by [skipDir] are not entered and symlinks are never followed:
// only entries that are directories or regular files themselves are
// visited. Each directory is opened once, as an [os.Root] from its
// parent's, and its files are opened from it by name, so every open is
// one path component, confined by the Root.
type walker struct {
	ctx        context.Context
	fn         walkFuncs
	unreadable atomic.Int64 // directories that could not be read

	mu    sync.Mutex
	cond  *sync.Cond
	stack []walkTask // last in, first out: a depth-first walk keeps few directories open
	busy  int        // workers running a task
}

// walkWorkers is the number of goroutines a walk uses.
func walkWorkers() int {
	return max(2, runtime.GOMAXPROCS(0))
}

// walk walks the tree of the directory start, opened in root, with
// workers goroutines, and returns when it is done or ctx is. It takes
// over start, which it closes. It returns the number of directories that
// could not be read.
func walk(ctx context.Context, start *os.Root, rel string, workers int, fn walkFuncs) int64 {
	w := &walker{ctx: ctx, fn: fn}
	w.cond = sync.NewCond(&w.mu)
	node := &dirNode{root: start, rel: rel}
	node.refs.Store(1)
	w.stack = append(w.stack, walkTask{dir: node, isDir: true})

	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { w.work(i) })
	}
	wg.Wait()
	return w.unreadable.Load()
}

// work runs tasks until none are left.
func (w *walker) work(worker int) {
	for {
		t, ok := w.next()
		if !ok {
			return
		}
		switch {
		case w.ctx.Err() != nil:
			t.dir.release()
		case t.isDir:
			w.readDir(worker, t)
		default:
			w.visitFiles(worker, t)
		}
		w.done()
	}
}

// next takes a task, waiting while other workers may still add some. It
// reports false when the walk is over.
func (w *walker) next() (walkTask, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.stack) == 0 && w.busy > 0 {
		w.cond.Wait()
	}
	if len(w.stack) == 0 {
		return walkTask{}, false
	}
	t := w.stack[len(w.stack)-1]
	w.stack[len(w.stack)-1] = walkTask{}
	w.stack = w.stack[:len(w.stack)-1]
	w.busy++
	return t, true
}

// done ends a task taken with next.
func (w *walker) done() {
	w.mu.Lock()
	w.busy--
	if w.busy == 0 && len(w.stack) == 0 {
		w.cond.Broadcast() // the walk is over: release the waiting workers
	}
	w.mu.Unlock()
}

// push adds tasks.
func (w *walker) push(ts []walkTask) {
	if len(ts) == 0 {
		return
	}
	w.mu.Lock()
	w.stack = append(w.stack, ts...)
	w.mu.Unlock()
	if len(ts) == 1 {
		w.cond.Signal()
	} else {
		w.cond.Broadcast()
	}
}

// readDir reads a directory and adds tasks for its subdirectories and
// files.
func (w *walker) readDir(worker int, t walkTask) {
	node := t.dir
	if t.name != "" {
		r, err := t.dir.root.OpenRoot(t.name)
		rel := path.Join(t.dir.rel, t.name)
		t.dir.release()
		if err != nil {
			w.unreadable.Add(1)
			return
		}
		node = &dirNode{root: r, rel: rel}
		node.refs.Store(1)
	}
	defer node.release()

	f, err := node.root.Open(".")
	if err != nil {
		w.unreadable.Add(1)
		return
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		w.unreadable.Add(1)
	}
	if w.fn.dir != nil {
		w.fn.dir(worker, node.rel, ents)
	}

	var tasks []walkTask
	var files []fs.DirEntry
	for _, e := range ents {
		switch typ := e.Type(); {
		case typ.IsDir():
			if !skipDir(e.Name()) {
				node.acquire()
				tasks = append(tasks, walkTask{dir: node, name: e.Name(), isDir: true})
			}
		case typ.IsRegular() && w.fn.file != nil:
			files = append(files, e)
			if len(files) == walkBatch {
				node.acquire()
				tasks = append(tasks, walkTask{dir: node, files: files})
				files = nil
			}
		}
	}
	if len(files) > 0 {
		node.acquire()
		tasks = append(tasks, walkTask{dir: node, files: files})
	}
	w.push(tasks)
}

// visitFiles visits a batch of files.
func (w *walker) visitFiles(worker int, t walkTask) {
	defer t.dir.release()
	for _, e := range t.files {
		if w.ctx.Err() != nil {
			return
		}
		w.fn.file(worker, t.dir, e)
	}
}
