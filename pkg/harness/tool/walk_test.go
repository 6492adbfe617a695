package tool

import (
	"context"
	"io/fs"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// openFDs counts the open file descriptors of the process, or -1 where
// /proc/self/fd does not exist.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

func TestWalk(t *testing.T) {
	dir, env := newEnv(t, nil)
	genTree(t, dir, 3000)
	fds := openFDs(t)
	goroutines := runtime.NumGoroutine()

	t.Run("complete", func(t *testing.T) {
		start, err := env.Root.OpenRoot(".")
		if err != nil {
			t.Fatal(err)
		}
		var files, dirs atomic.Int64
		walk(context.Background(), start, ".", 4, walkFuncs{
			dir:  func(int, string, []fs.DirEntry) { dirs.Add(1) },
			file: func(int, *dirNode, fs.DirEntry) { files.Add(1) },
		})
		t.Logf("visited %d directories and %d files", dirs.Load(), files.Load())
		// genTree puts its files in 11 directories, 3 of them skipped
		// (.git, node_modules/pkg under node_modules, d4/target).
		if dirs.Load() < 8 || files.Load() < 2000 || files.Load() >= 3000 {
			t.Errorf("visited %d directories and %d files", dirs.Load(), files.Load())
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		start, err := env.Root.OpenRoot(".")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var files atomic.Int64
		done := make(chan struct{})
		go func() {
			walk(ctx, start, ".", 4, walkFuncs{file: func(int, *dirNode, fs.DirEntry) {
				if files.Add(1) == 10 {
					cancel()
				}
			}})
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the walk did not stop when its context was cancelled")
		}
		if n := files.Load(); n > 10+4*walkBatch {
			t.Errorf("visited %d files after the cancel", n)
		}
	})

	// Every directory root the walks opened is closed, and every worker
	// has returned.
	if n := openFDs(t); n != fds {
		t.Errorf("open file descriptors: %d before the walks, %d after", fds, n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("goroutines: %d before the walks, %d after", goroutines, n)
	}
}
