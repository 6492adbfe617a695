package sandbox

// callerIDs: Windows has no user ids.
func callerIDs() (uid, gid int) { return -1, -1 }

// lend has nothing to do where commands run as the caller.
func lend(path string, uid, gid int) error { return nil }

// writableBy: commands run as the caller.
func writableBy(path string, uid, gid int) string { return "" }
