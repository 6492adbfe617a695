// Package scratch makes temporary directories that outlive no process.
//
// A directory [Make] returns is held by a lock on it that its process
// keeps until [Dir.Remove], so that [Sweep] can tell a directory whose
// process died (kill -9 removes nothing) from one in use, whatever pid
// namespace either process is in: the kernel drops the lock with the
// last descriptor of the process that held it.
package scratch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Dir is a directory in the temporary directory, held by this process.
type Dir struct {
	// Path is the directory's absolute path.
	Path string
	lock *os.File // the directory itself, locked
}

// Make makes a directory named prefix followed by a random string, mode
// perm, and holds it. A prefix ends with a dot, not a dash: earlier
// versions swept "io-harness-<kind>-<pid>-…" by pid, and must not take a
// held directory's random digits for a dead pid. The directory is made under a name no sweep considers
// and renamed once held, so that a concurrent Sweep never sees it
// unheld.
func Make(prefix string, perm os.FileMode) (*Dir, error) {
	tmp, err := os.MkdirTemp("", "."+prefix)
	if err != nil {
		return nil, err
	}
	d := &Dir{Path: tmp}
	if err := os.Chmod(tmp, perm); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if d.lock, err = os.Open(tmp); err == nil {
		err = lock(d.lock, true)
	}
	if err != nil {
		if d.lock != nil {
			d.lock.Close()
		}
		os.Remove(tmp)
		return nil, fmt.Errorf("hold %s: %w", tmp, err)
	}
	d.Path = filepath.Join(filepath.Dir(tmp), strings.TrimPrefix(filepath.Base(tmp), "."))
	if err := os.Rename(tmp, d.Path); err != nil {
		d.lock.Close()
		os.Remove(tmp)
		return nil, err
	}
	return d, nil
}

// Remove removes the directory with everything in it (files a command
// left unwritable included), then lets it go.
func (d *Dir) Remove() error {
	if d == nil || d.lock == nil {
		return nil
	}
	err := sandbox.RemoveAll(d.Path)
	d.lock.Close()
	d.lock = nil
	return err
}

// Sweep removes the directories named prefix… in the temporary directory
// that no process holds.
func Sweep(prefix string) {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(os.TempDir(), e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if lock(f, false) == nil {
			sandbox.RemoveAll(p)
		}
		f.Close()
	}
}
