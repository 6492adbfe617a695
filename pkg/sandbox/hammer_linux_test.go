package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHammer: many goroutines write files outside any sandbox while
// sandboxes of every backend spawn. A restriction that leaked onto a host
// thread (the floor confines the thread it spawns from) would make some
// of those writes fail.
func TestHammer(t *testing.T) {
	if _, err := os.Stat("/bin/true"); err != nil {
		t.Skip("no /bin/true to spawn")
	}
	sandboxes := linuxSandboxes(t, false)
	dir := hostScratch(t)
	const writers = 200
	var writes, failures atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(dir, fmt.Sprint(i))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := os.WriteFile(path, []byte("host write"), 0o644); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				writes.Add(1)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	var runs atomic.Int64
	var sg sync.WaitGroup
	for _, n := range sandboxes {
		for range 3 {
			sg.Add(1)
			go func() {
				defer sg.Done()
				for range 10 {
					res, err := n.sb.Run(context.Background(), &Spec{Argv: []string{"/bin/true"}})
					if err != nil || res.ExitCode != 0 {
						t.Errorf("%s: %v %+v", n.label, err, res)
						return
					}
					runs.Add(1)
				}
			}()
		}
	}
	sg.Wait()
	close(stop)
	wg.Wait()
	t.Logf("%d host writes from %d goroutines during %d sandbox runs over %d backends", writes.Load(), writers, runs.Load(), len(sandboxes))
	if f := failures.Load(); f > 0 {
		t.Errorf("%d of %d host writes failed: %v", f, writes.Load(), firstErr.Load())
	}
	if writes.Load() < writers {
		t.Errorf("only %d writes: the hammer did not run", writes.Load())
	}
}
