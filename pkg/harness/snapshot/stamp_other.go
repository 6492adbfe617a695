//go:build !unix

package snapshot

import "io/fs"

// noFollow: elsewhere os.Root itself refuses links that lead out.
const noFollow = 0

// stamp identifies a version of a file by its size and modification
// time, the most this platform's file info says.
type stamp struct {
	size  int64
	mtime int64
}

func stampOf(fi fs.FileInfo) stamp {
	return stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}
