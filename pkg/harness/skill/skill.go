// Package skill loads skills and bundles, and is the read_skill tool.
//
// A skill is a directory holding SKILL.md: YAML front matter with a name
// and a description, then a Markdown body, beside companion files
// (scripts, references, templates). The model is shown every skill's
// name and description; read_skill gives it a body, or a companion file,
// when it needs one. Reading goes through the read policy (the target is
// "skill:<name>/<file>") and never leaves the skill's directory: the
// directory is opened as an [os.Root], so an absolute path, a ".." or a
// symlink that leads out is refused.
//
// A bundle is a directory that contributes skills, MCP servers and
// deny-only policy rules at once (see [LoadBundle]); its names are
// namespaced by the bundle's. A bundle with anything wrong in it is
// dropped whole and reported: never half-loaded.
package skill

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Skill is one loaded skill.
type Skill struct {
	// Name is the front matter's name; a bundle's skills are
	// <bundle>__<name>.
	Name        string `json:"name"`
	Description string `json:"description"`
	// Dir is the skill's directory, absolute.
	Dir string `json:"dir"`
	// Body is SKILL.md after its front matter.
	Body string `json:"-"`
}

// Bounds of a skill.
const (
	// MaxSkillFile bounds SKILL.md.
	MaxSkillFile = 256 << 10
	// MaxName and MaxDescription bound the front matter's fields.
	MaxName        = 64
	MaxDescription = 1024
	// MaxSkills bounds the skills a run lists for the model.
	MaxSkills = 64
)

// Error is a skill or bundle that cannot be loaded. Path names the file
// or directory at fault.
type Error struct {
	Path   string
	Reason string
}

// Error implements error.
func (e *Error) Error() string { return "skill: " + e.Path + ": " + e.Reason }

// frontMatter is the part of SKILL.md's front matter the harness reads;
// other keys (license, allowed-tools, metadata) are allowed and ignored.
type frontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// Parse reads SKILL.md's text: a first line "---", YAML up to a line
// "---", then the body. The name must be 1 to 64 lowercase letters,
// digits and hyphens, not starting or ending with a hyphen and without
// "--"; the description 1 to 1024 bytes of text.
func Parse(data []byte) (name, description, body string, err error) {
	if len(data) > MaxSkillFile {
		return "", "", "", fmt.Errorf("over %d bytes", MaxSkillFile)
	}
	if !utf8.Valid(data) {
		return "", "", "", errors.New("not UTF-8 text")
	}
	s := strings.ReplaceAll(string(bytes.TrimPrefix(data, []byte("\ufeff"))), "\r\n", "\n")
	rest, ok := strings.CutPrefix(s, "---\n")
	if !ok {
		return "", "", "", errors.New("no front matter: the file must start with a line ---")
	}
	var yml string
	switch i := strings.Index(rest, "\n---\n"); {
	case strings.HasPrefix(rest, "---\n"):
		yml, body = "", rest[4:]
	case i >= 0:
		yml, body = rest[:i], rest[i+5:]
	case strings.HasSuffix(rest, "\n---"):
		yml, body = strings.TrimSuffix(rest, "\n---"), ""
	default:
		return "", "", "", errors.New("the front matter does not end with a line ---")
	}
	var fm frontMatter
	if err := yaml.Unmarshal([]byte(yml), &fm); err != nil {
		return "", "", "", fmt.Errorf("the front matter is not valid YAML: %v", err)
	}
	if err := checkName(fm.Name); err != nil {
		return "", "", "", fmt.Errorf("name: %v", err)
	}
	d := strings.TrimSpace(fm.Description)
	switch {
	case d == "":
		return "", "", "", errors.New("description: required: it is what the model reads to choose the skill")
	case len(d) > MaxDescription:
		return "", "", "", fmt.Errorf("description: over %d bytes", MaxDescription)
	case strings.ContainsFunc(d, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f }):
		return "", "", "", errors.New("description: contains a control character")
	}
	return fm.Name, d, strings.TrimLeft(body, "\n"), nil
}

// checkName checks a skill's or a bundle's name.
func checkName(n string) error {
	switch {
	case n == "":
		return errors.New("required")
	case len(n) > MaxName:
		return fmt.Errorf("over %d bytes", MaxName)
	case strings.HasPrefix(n, "-") || strings.HasSuffix(n, "-") || strings.Contains(n, "--"):
		return fmt.Errorf("%q: a hyphen may not start or end it, nor follow another", n)
	}
	for _, c := range n {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("%q: only lowercase letters, digits and hyphens", n)
		}
	}
	return nil
}

// LoadDir loads the skill in dir, whose SKILL.md must be a regular file.
func LoadDir(dir string) (Skill, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Skill{}, &Error{dir, err.Error()}
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return Skill{}, &Error{dir, err.Error()}
	}
	defer root.Close()
	data, err := readFile(root, "SKILL.md", MaxSkillFile)
	if err != nil {
		return Skill{}, &Error{filepath.Join(dir, "SKILL.md"), err.Error()}
	}
	name, desc, body, err := Parse(data)
	if err != nil {
		return Skill{}, &Error{filepath.Join(dir, "SKILL.md"), err.Error()}
	}
	return Skill{Name: name, Description: desc, Dir: abs, Body: body}, nil
}

// Load loads the skills of dirs: each one is a skill's directory (it
// holds SKILL.md), or a directory of skills' directories. Every skill
// must load, and every name be unique.
func Load(dirs []string) ([]Skill, error) {
	var out []Skill
	seen := map[string]string{}
	for _, d := range dirs {
		skills, err := loadTree(d)
		if err != nil {
			return nil, err
		}
		for _, s := range skills {
			if prev, dup := seen[s.Name]; dup {
				return nil, &Error{s.Dir, fmt.Sprintf("the skill name %q is also %s's", s.Name, prev)}
			}
			seen[s.Name] = s.Dir
			out = append(out, s)
		}
	}
	if len(out) > MaxSkills {
		return nil, &Error{strings.Join(dirs, ", "), fmt.Sprintf("%d skills, over the %d a run lists", len(out), MaxSkills)}
	}
	return out, nil
}

// loadTree loads dir as a skill, or each of its subdirectories that
// holds SKILL.md as one.
func loadTree(dir string) ([]Skill, error) {
	if fi, err := os.Lstat(filepath.Join(dir, "SKILL.md")); err == nil && fi.Mode().IsRegular() {
		s, err := LoadDir(dir)
		if err != nil {
			return nil, err
		}
		return []Skill{s}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &Error{dir, err.Error()}
	}
	var out []Skill
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Lstat(filepath.Join(sub, "SKILL.md")); err != nil {
			continue
		}
		s, err := LoadDir(sub)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, &Error{dir, "holds no SKILL.md, in itself or a directory under it"}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Catalog is what the model is told of the skills: a line each.
func Catalog(skills []Skill) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Skills: instructions for particular kinds of work, with files beside them. When one fits the task, read it with read_skill (its name) before you start, and its files with read_skill (name and file).\n")
	for _, s := range skills {
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, strings.Join(strings.Fields(s.Description), " "))
	}
	return b.String()
}

// readFile reads a regular file of root, following links only inside it,
// up to max bytes.
func readFile(root *os.Root, name string, max int64) ([]byte, error) {
	fi, err := root.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit", name, fi.Size(), max)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s has grown over the %d-byte limit", name, max)
	}
	return data, nil
}

// files lists a skill's companion files: regular files under its
// directory, SKILL.md aside, as slash paths, at most max of them.
// Symlinks are not followed or listed.
func files(dir string, max int) ([]string, bool) {
	var out []string
	more := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != dir {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "SKILL.md" {
			return nil
		}
		if len(out) == max {
			more = true
			return filepath.SkipAll
		}
		out = append(out, rel)
		return nil
	})
	return out, more
}
