package wasi

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// plan is a validated spec with its defaults filled in and its paths
// resolved.
type plan struct {
	sandbox.Spec
	limits sandbox.Limits
	// disk is the disk cap: Limits.Disk, or defaultDisk.
	disk int64
}

// defaultDisk is the disk cap when Limits.Disk is zero.
const defaultDisk = 1 << 30

func invalid(step, format string, args ...any) *sandbox.Error {
	return &sandbox.Error{Kind: sandbox.ErrInvalid, Backend: Backend, Step: step, Err: fmt.Errorf(format, args...)}
}

// check validates s as the native backends do (see [sandbox.Spec.Validate]),
// so that a spec one backend takes is taken by the other, and returns its
// plan: the limits with their defaults, the paths cleaned.
func check(s *sandbox.Spec) (*plan, *sandbox.Error) {
	if s == nil {
		return nil, invalid("spec", "nil spec")
	}
	if err := s.Validate(); err != nil {
		se, ok := err.(*sandbox.Error)
		if !ok {
			se = &sandbox.Error{Kind: sandbox.ErrInvalid, Err: err}
		}
		se.Backend = Backend
		return nil, se
	}
	if s.Limits.Disk < 0 {
		return nil, invalid("limits.disk", "negative")
	}
	p := &plan{Spec: *s, limits: s.Limits.WithDefaults()}
	if p.disk = p.limits.Disk; p.disk == 0 {
		p.disk = defaultDisk
	}
	clean := func(in []string) []string {
		out := make([]string, len(in))
		for i, v := range in {
			out[i] = filepath.Clean(v)
		}
		return out
	}
	p.ReadOnly, p.Writable = clean(s.ReadOnly), clean(s.Writable)
	if s.Workdir != "" {
		p.Workdir = filepath.Clean(s.Workdir)
	}
	return p, nil
}

// resolve checks that the workdir and the extra paths exist and are
// directories (a WASI preview 1 guest can only be given directories), and
// replaces them with their real paths. It refuses a read-only path inside
// a writable one: the guest chooses which of its directories to open a
// name through, so the writable one would win.
func resolve(p *plan) *sandbox.Error {
	dir := func(field, path string) (string, *sandbox.Error) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return "", &sandbox.Error{Kind: sandbox.ErrInvalid, Backend: Backend, Step: field, Err: err}
		}
		fi, err := os.Stat(real)
		if err != nil || !fi.IsDir() {
			return "", invalid(field, "%s is not a directory; the wasi backend mounts directories only", path)
		}
		return real, nil
	}
	var err *sandbox.Error
	if p.Workdir != "" {
		if p.Workdir, err = dir("workdir", p.Workdir); err != nil {
			return err
		}
	}
	for i := range p.ReadOnly {
		if p.ReadOnly[i], err = dir(fmt.Sprintf("read_only[%d]", i), p.ReadOnly[i]); err != nil {
			return err
		}
	}
	for i := range p.Writable {
		if p.Writable[i], err = dir(fmt.Sprintf("writable[%d]", i), p.Writable[i]); err != nil {
			return err
		}
	}
	outer := append([]string{p.Workdir}, p.Writable...)
	for i, ro := range p.ReadOnly {
		for _, w := range outer {
			if w != "" && (ro == w || beneath(ro, w)) {
				return invalid(fmt.Sprintf("read_only[%d]", i), "%s is inside the writable %s; the guest could write it through that mount", ro, w)
			}
		}
	}
	return nil
}

func beneath(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// guestPath is where a host directory appears in the guest: at the same
// path, with forward slashes ("C:\src" is "/C:/src").
func guestPath(host string) string {
	return "/" + strings.TrimLeft(filepath.ToSlash(host), "/")
}

// mount is one directory the guest sees.
type mount struct {
	host, guest string
	writable    bool
}

// mounts lays out the guest's filesystem: the workdir at / (the guest's
// working directory) and, when the caller named it, at its host path too;
// the private temporary directory at /tmp; each read-only and writable
// path at its host path. Two directories at one guest path are refused.
func mounts(p *plan, workdir, tmp string, ephemeral bool) ([]mount, *sandbox.Error) {
	ms := []mount{{workdir, "/", true}, {tmp, "/tmp", true}}
	at := map[string]int{"/": 0, "/tmp": 1}
	add := func(field string, m mount, optional bool) *sandbox.Error {
		if i, ok := at[m.guest]; ok {
			if ms[i].host == m.host && ms[i].writable == m.writable || optional {
				return nil
			}
			what := map[string]string{"/": "the workdir", "/tmp": "the run's private /tmp"}[m.guest]
			if what == "" {
				what = ms[i].host
			}
			return invalid(field, "%s would be mounted at %s, where %s is", m.host, m.guest, what)
		}
		at[m.guest] = len(ms)
		ms = append(ms, m)
		return nil
	}
	if !ephemeral {
		add("workdir", mount{workdir, guestPath(workdir), true}, true)
	}
	for i, ro := range p.ReadOnly {
		if err := add(fmt.Sprintf("read_only[%d]", i), mount{ro, guestPath(ro), false}, false); err != nil {
			return nil, err
		}
	}
	for i, w := range p.Writable {
		if err := add(fmt.Sprintf("writable[%d]", i), mount{w, guestPath(w), true}, false); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

// removeTree removes dir, first giving back write permission to any
// directory the guest took it from.
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
