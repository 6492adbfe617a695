package sandbox

import (
	"io/fs"
	"time"
)

// Upper is the upper layer of a command's workdir: what the command
// created, changed and removed there, as overlayfs recorded it, while
// [Spec.Collect] runs. Its methods read the layer, never the workdir, and
// never follow a symbolic link.
type Upper struct {
	// Killed says the command did not end by itself: a cap or a signal
	// stopped it, so a file it was writing may be cut short, and a
	// caller that applies the changes may rather drop them all.
	Killed bool

	fd      int             // the layer's root directory
	conceal map[string]bool // the whiteouts the sandbox made, not the command
}

// ChangeKind is what a [Change] is.
type ChangeKind string

// The kinds of change.
const (
	// ChangeFile: a regular file created or changed; Open reads it.
	ChangeFile ChangeKind = "file"
	// ChangeDir: a directory created, or one whose attributes or
	// contents changed. Opaque says whether what the workdir had there
	// is gone.
	ChangeDir ChangeKind = "dir"
	// ChangeSymlink: a symbolic link created or changed; Target is where
	// it points.
	ChangeSymlink ChangeKind = "symlink"
	// ChangeRemoved: the path was removed (a file, or a directory with
	// everything in it).
	ChangeRemoved ChangeKind = "removed"
	// ChangeOther: a fifo, a socket or a device node, which is never
	// anything but reported.
	ChangeOther ChangeKind = "other"
)

// Change is one entry of an upper layer.
type Change struct {
	// Path is slash-separated and relative to the workdir.
	Path string
	Kind ChangeKind
	// Mode is the entry's type, permission and special bits.
	Mode    fs.FileMode
	Size    int64
	ModTime time.Time
	// Target is a symbolic link's.
	Target string
	// Opaque marks a directory made anew where the workdir had one: its
	// old contents are gone.
	Opaque bool
	// Links is a file's number of hard links in the layer, and Inode
	// tells which of its names are one file.
	Links int
	Inode uint64
}
