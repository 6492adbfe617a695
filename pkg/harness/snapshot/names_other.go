//go:build !linux

package snapshot

import (
	"io/fs"
	"os"
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
