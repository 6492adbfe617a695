//go:build !linux

package snapshot

import (
	"io/fs"
	"os"
	"time"
)

// dirHandle is an open directory of the walk, inside its root.
type dirHandle struct {
	root *os.Root
	rel  string
}

func openTop(root *os.Root) (dirHandle, error) { return dirHandle{root, "."}, nil }

func openSub(parent dirHandle, name string) (dirHandle, error) {
	rel := parent.rel + "/" + name
	fi, err := parent.root.Lstat(rel)
	if err != nil {
		return dirHandle{}, err
	}
	if !fi.IsDir() {
		return dirHandle{}, &fs.PathError{Op: "open", Path: rel, Err: fs.ErrInvalid}
	}
	return dirHandle{parent.root, rel}, nil
}

func (dirHandle) close() {}

// dirKey is what tells a directory's listing from a later one; elsewhere
// than Linux nothing does, and every walk lists.
type dirKey struct{ ok bool }

func (dirKey) changed() time.Time { return time.Time{} }

func (dirHandle) key() dirKey { return dirKey{} }

// names lists d: each entry's name and type.
func (d dirHandle) names() ([]nameType, error) {
	f, err := d.root.Open(d.rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]nameType, len(entries))
	for i, e := range entries {
		out[i] = nameType{name: e.Name(), typ: e.Type()}
	}
	return out, nil
}
