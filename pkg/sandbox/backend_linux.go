package sandbox

import (
	"context"
	"fmt"
	"os"

	"github.com/initorigin/io-harness-go/pkg/sandbox/internal/spawn"
)

// openBackend makes the named backend and probes it by use.
func openBackend(ctx context.Context, name string, o *Options) (backend, error) {
	unavailable := func(err error) (backend, error) {
		return nil, &Error{Kind: ErrUnavailable, Backend: name, Err: err}
	}
	// A root caller's commands run as the unprivileged ids of o, unless o
	// asks for the caller's own.
	root := os.Geteuid() == 0 && !o.Caller
	uid, gid := os.Geteuid(), os.Getegid()
	if root {
		uid, gid = o.UID, o.GID
	}
	switch name {
	case BackendLinuxNS, BackendLinuxLandlock:
		helper, err := findHelper(o)
		if err != nil {
			return unavailable(err)
		}
		b := &spawnerBackend{name: name, helper: helper, landlock: landlockVersion(), root: root, uid: uid, gid: gid}
		if name == BackendLinuxNS {
			b.hide = newHiding(uid, commandGroups(root, gid))
			b.flags = spawn.NS | spawn.Seccomp
			if b.landlock > 0 {
				b.flags |= spawn.Landlock
			}
		} else {
			if b.landlock == 0 {
				return unavailable(fmt.Errorf("the kernel has no Landlock"))
			}
			b.flags = spawn.Landlock | spawn.Seccomp | spawn.DenyInet | spawn.DenySetsid
		}
		if err := probeSpawner(ctx, b); err != nil {
			return unavailable(fmt.Errorf("probe: %w", err))
		}
		return b, nil
	case BackendBwrap:
		path, err := findBwrap()
		if err != nil {
			return unavailable(err)
		}
		b := &bwrapBackend{path: path, root: root, uid: uid, gid: gid, hide: newHiding(uid, commandGroups(root, gid))}
		if err := probeBwrap(ctx, b); err != nil {
			return unavailable(fmt.Errorf("probe: %w", err))
		}
		return b, nil
	case BackendFloor, BackendHost:
		b := &floorBackend{name: name, root: root, uid: uid, gid: gid}
		if name == BackendFloor {
			b.landlock = landlockVersion()
		} else {
			b.uid, b.gid = os.Geteuid(), os.Getegid() // host runs commands as the caller
		}
		if err := floorProbe(b); err != nil {
			return unavailable(fmt.Errorf("probe: %w", err))
		}
		return b, nil
	}
	return unavailable(fmt.Errorf("unknown backend on linux (want %s, %s, %s, %s or %s)",
		BackendLinuxNS, BackendLinuxLandlock, BackendBwrap, BackendFloor, BackendHost))
}
