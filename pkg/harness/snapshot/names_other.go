//go:build !linux

package snapshot

import (
	"io/fs"
	"os"
	"time"
)

// readNames lists the directory f: each entry's name and type.
func readNames(f *os.File, _ func(name string) (fs.FileMode, error)) ([]nameType, error) {
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

// dirKey is what tells a directory's listing from a later one; elsewhere
// than Linux nothing does, and every walk lists.
type dirKey struct{ ok bool }

func (dirKey) changed() time.Time { return time.Time{} }

func keyOf(*os.File) dirKey { return dirKey{} }
