package skill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

// A bundle is a directory with bundle.json, and skills under skills/:
//
//	acme/
//	  bundle.json    {"name": "acme", "mcp_servers": [...], "deny": [...]}
//	  skills/review/SKILL.md
//
// Its skills are named acme__review. Its MCP servers are named
// acme-<server> (an MCP server's name cannot hold "__", which splits
// mcp__<server>__<tool>), and its rules are deny rules only: a bundle can
// narrow what a run may do, never widen it.

// Bundle is one loaded bundle.
type Bundle struct {
	Name   string       `json:"name"`
	Dir    string       `json:"dir"`
	Skills []Skill      `json:"skills,omitempty"`
	MCP    []mcp.Server `json:"mcp_servers,omitempty"`
	// Deny are the bundle's rules, all deny, as a layer named
	// "bundle:<name>".
	Deny policy.Layer `json:"deny"`
}

// manifest is bundle.json.
type manifest struct {
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	MCPServers  []mcp.Server  `json:"mcp_servers,omitempty"`
	Deny        []policy.Rule `json:"deny,omitempty"`
}

// maxManifest bounds bundle.json.
const maxManifest = 1 << 20

// LoadBundle loads the bundle in dir, whole or not at all: bundle.json
// must be valid (unknown fields are errors), its name a skill name
// without "__", every skill under skills/ must load, every MCP server be
// valid, and every rule be a valid deny rule.
func LoadBundle(dir string) (*Bundle, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &Error{dir, err.Error()}
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, &Error{dir, err.Error()}
	}
	defer root.Close()
	data, err := readFile(root, "bundle.json", maxManifest)
	if err != nil {
		return nil, &Error{filepath.Join(dir, "bundle.json"), err.Error()}
	}
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, &Error{filepath.Join(dir, "bundle.json"), err.Error()}
	}
	if err := checkName(m.Name); err != nil {
		return nil, &Error{filepath.Join(dir, "bundle.json"), "name: " + err.Error()}
	}
	b := &Bundle{Name: m.Name, Dir: abs, Deny: policy.Layer{Name: "bundle:" + m.Name}}
	if _, err := os.Stat(filepath.Join(abs, "skills")); err == nil {
		skills, err := loadTree(filepath.Join(abs, "skills"))
		if err != nil {
			return nil, err
		}
		for _, s := range skills {
			s.Name = m.Name + "__" + s.Name
			b.Skills = append(b.Skills, s)
		}
	}
	for i, s := range m.MCPServers {
		s.Name = m.Name + "-" + s.Name
		m.MCPServers[i] = s
	}
	if err := mcp.Validate(m.MCPServers); err != nil {
		return nil, &Error{filepath.Join(dir, "bundle.json"), err.Error()}
	}
	b.MCP = m.MCPServers
	for i, r := range m.Deny {
		if err := r.Validate(); err != nil {
			return nil, &Error{filepath.Join(dir, "bundle.json"), fmt.Sprintf("deny[%d]: %v", i, err)}
		}
		if r.Effect != policy.Deny {
			return nil, &Error{filepath.Join(dir, "bundle.json"), fmt.Sprintf("deny[%d]: a bundle's rules only deny; %q would widen what a run may do", i, r.Effect)}
		}
		b.Deny.Rules = append(b.Deny.Rules, r)
	}
	return b, nil
}

// Dropped is a bundle that did not load, and why.
type Dropped struct {
	Dir    string `json:"dir"`
	Reason string `json:"reason"`
}

// LoadBundles loads every bundle of dirs. A bundle that does not load, or
// whose name (or a skill's or server's) another bundle or taken already
// holds, is dropped whole and listed with its reason; the others load.
// taken names the skills and MCP servers the run has without bundles.
func LoadBundles(dirs []string, taken []string) ([]Bundle, []Dropped) {
	used := map[string]bool{}
	for _, n := range taken {
		used[n] = true
	}
	var out []Bundle
	var dropped []Dropped
	for _, d := range dirs {
		b, err := LoadBundle(d)
		if err == nil {
			err = claim(b, used)
		}
		if err != nil {
			var se *Error
			reason := err.Error()
			if errors.As(err, &se) {
				reason = se.Path + ": " + se.Reason
			}
			dropped = append(dropped, Dropped{Dir: d, Reason: reason})
			continue
		}
		out = append(out, *b)
	}
	return out, dropped
}

// claim reserves a bundle's names, or says which one is taken.
func claim(b *Bundle, used map[string]bool) error {
	names := []string{"bundle:" + b.Name}
	for _, s := range b.Skills {
		names = append(names, s.Name)
	}
	for _, s := range b.MCP {
		names = append(names, s.Name)
	}
	for _, n := range names {
		if used[n] {
			return &Error{b.Dir, fmt.Sprintf("the name %q is taken", n)}
		}
	}
	for _, n := range names {
		used[n] = true
	}
	return nil
}
