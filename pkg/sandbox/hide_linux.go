package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// hiding is a backend's default hiding places, each with whether the
// command's user could reach it were it not hidden. A place it could not
// reach (a file only root may read, for a command that is never root)
// needs no mount, unless a path the run shows lies beneath it: then the
// empty directory over it is what lets the command reach that path.
type hiding struct {
	paths []string
	open  []bool
}

// newHiding judges DefaultHide for a command that runs as uid with the
// groups gids. An empty directory has nothing to hide (yet: the
// judgement is made once, when the backend opens).
func newHiding(uid int, gids []int) hiding {
	h := hiding{paths: DefaultHide()}
	for _, p := range h.paths {
		h.open = append(h.open, reachable(p, uid, gids) && !emptyDir(p))
	}
	return h
}

// emptyDir reports whether path is a directory with nothing in it.
func emptyDir(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		return false
	}
	names, err := f.Readdirnames(1)
	return err == io.EOF && len(names) == 0
}

// commandGroups returns the groups a command of this process runs with:
// gid alone when the ids switch, else the caller's.
func commandGroups(switched bool, gid int) []int {
	if switched {
		return []int{gid}
	}
	groups, _ := os.Getgroups()
	return append(groups, os.Getegid())
}

// forRun returns the paths to hide for a run that shows the paths in
// shown (workdir, read-only and writable paths) and hides extra besides:
// the open places, those with a shown path beneath, and extra; less any
// inside another hidden place that no shown path shows again.
func (h hiding) forRun(shown, extra []string) []string {
	var cand []string
	for i, p := range h.paths {
		if h.open[i] || anyBeneath(shown, p) {
			cand = append(cand, p)
		}
	}
	cand = append(cand, extra...)
	var out []string
	for _, p := range cand {
		if anyAbove(cand, p) && !anyAtOrAbove(shown, p) {
			continue // inside a hidden place, and not shown again: invisible
		}
		out = append(out, p)
	}
	return out
}

// anyBeneath reports whether a path of list is strictly inside dir.
func anyBeneath(list []string, dir string) bool {
	for _, p := range list {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// anyAbove reports whether a path of list strictly contains p.
func anyAbove(list []string, p string) bool {
	for _, q := range list {
		if q != p && strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// anyAtOrAbove reports whether a path of list is p or contains it.
func anyAtOrAbove(list []string, p string) bool {
	for _, q := range list {
		if q == p || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// reachable reports whether uid with gids can search every directory
// leading to path and read it (a file) or read or search it (a
// directory), by owner, group and mode, conservatively: an access ACL
// anywhere counts as access.
func reachable(path string, uid int, gids []int) bool {
	for dir := filepath.Dir(path); dir != "/"; dir = filepath.Dir(dir) {
		if !permits(dir, uid, gids, 0o1) {
			return false
		}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	if fi.IsDir() {
		return permits(path, uid, gids, 0o4) || permits(path, uid, gids, 0o1)
	}
	return permits(path, uid, gids, 0o4)
}

// permits applies the mode of path to uid and gids for the bits want.
func permits(path string, uid int, gids []int, want uint32) bool {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return false
	}
	if uid == 0 {
		return true
	}
	if _, err := unix.Getxattr(path, "system.posix_acl_access", nil); err == nil {
		return true
	}
	mode := st.Mode & 0o777
	switch {
	case int(st.Uid) == uid:
		mode >>= 6
	case inGroups(int(st.Gid), gids):
		mode >>= 3
	}
	return mode&want == want
}

func inGroups(gid int, gids []int) bool {
	for _, g := range gids {
		if g == gid {
			return true
		}
	}
	return false
}
