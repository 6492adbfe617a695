//go:build !linux

package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
)

// removeTree removes dir, first giving back write permission to any
// directory the command took it from.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
