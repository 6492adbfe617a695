package tool

import (
	"os"
	"path/filepath"
	"strings"
)

// Programs is the system PATH of the sandbox: the directories in which a
// bare program name of an exec is looked up. It never holds a directory
// of the workspace or of the temporary directory, where the agent's own
// files are, so a bare name always means a program of the system: the
// exec policy's "go" is the system's go, never a "go" the agent built.
type Programs struct {
	dirs []string // absolute and real
}

// DefaultPath is the system PATH when the host's has no usable entry.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// NewPrograms makes the system PATH from a host PATH list: its absolute
// entries that are directories outside every excluded tree, in order and
// without repeats, with symlinks resolved. exclude names the trees whose
// files the agent may have written (the workspace, the temporary
// directory).
func NewPrograms(pathList string, exclude ...string) *Programs {
	var ex []string
	for _, e := range exclude {
		if e == "" {
			continue
		}
		if real, err := filepath.EvalSymlinks(e); err == nil {
			e = real
		}
		ex = append(ex, filepath.Clean(e))
	}
	p := &Programs{}
	seen := map[string]bool{}
	add := func(list string) {
		for _, d := range filepath.SplitList(list) {
			if !filepath.IsAbs(d) {
				continue // "", "." and relative entries name the working directory
			}
			real, err := filepath.EvalSymlinks(d)
			if err != nil || seen[real] || within(real, ex) {
				continue
			}
			if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
				continue
			}
			seen[real] = true
			p.dirs = append(p.dirs, real)
		}
	}
	add(pathList)
	if len(p.dirs) == 0 {
		add(DefaultPath)
	}
	return p
}

// within reports whether p is one of trees or under one.
func within(p string, trees []string) bool {
	for _, t := range trees {
		if p == t || strings.HasPrefix(p, t+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// Path returns the PATH value a sandboxed command runs with.
func (p *Programs) Path() string {
	if p == nil || len(p.dirs) == 0 {
		return DefaultPath
	}
	return strings.Join(p.dirs, string(filepath.ListSeparator))
}

// lookup returns the real path of the file a bare name finds on the
// system PATH.
func (p *Programs) lookup(name string) (string, bool) {
	if p == nil || name == "" || strings.ContainsAny(name, `/\`) {
		return "", false
	}
	for _, d := range p.dirs {
		f := filepath.Join(d, name)
		fi, err := os.Stat(f)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		if real, err := filepath.EvalSymlinks(f); err == nil {
			return real, true
		}
		return f, true
	}
	return "", false
}

// Resolve says what program a spelling of argv[0] runs in the sandbox;
// it is the policy's Resolver. A bare name is the system's program. A
// path is the system's program only when it is the very file the bare
// name finds; a relative path names a file of the workspace copy and
// never is.
func (p *Programs) Resolve(program string) (name, file string, system bool) {
	if !strings.ContainsAny(program, `/\`) {
		f, _ := p.lookup(program)
		return program, f, true
	}
	name = filepath.Base(program)
	if !filepath.IsAbs(program) {
		return name, "", false
	}
	file = filepath.Clean(program)
	if real, err := filepath.EvalSymlinks(file); err == nil {
		file = real
	}
	sys, ok := p.lookup(name)
	return name, file, ok && sys == file
}
