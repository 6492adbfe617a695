//go:build !unix

package snapshot

import "io/fs"

// noFollow: elsewhere os.Root itself refuses links that lead out.
const noFollow = 0

// stamp identifies a version of a file by its size, modification time
// and mode, the most this platform's file info says.
type stamp struct {
	size         int64
	mtime, ctime int64
	mode         fs.FileMode
}

func stampOf(fi fs.FileInfo) stamp {
	return stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
}

// ownedBy: this platform has no owners to give.
func ownedBy(fs.FileInfo, *Owner) bool { return true }
