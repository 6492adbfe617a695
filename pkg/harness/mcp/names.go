package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// MaxNameLen is the longest tool name every vendor accepts: OpenAI's and
// Anthropic's function names are ^[a-zA-Z0-9_-]{1,64}$.
const MaxNameLen = 64

// Prefix is what every MCP tool's name starts with.
const Prefix = "mcp__"

// validName reports whether s is a name every vendor accepts.
func validName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// mapping is a tool's name as the agent sees it.
type mapping struct {
	Remote string // the server's name for the tool
	Name   string // mcp__<server>__<tool>, as mapped
}

// mapNames maps a server's tool names to the names the agent sees:
// mcp__<server>__<tool> when that is a valid name of at most 64 bytes;
// otherwise the tool part with every other byte made '_', cut to fit,
// and an 8-digit hash of the server's own name appended, so that two
// names never map to one. The result does not depend on the order of
// the list. A name listed twice, an empty name, and a mapped name that
// still collides (a server's tool literally named like another's hashed
// form) are dropped and reported in notes.
func mapNames(server string, remote []string) (out []mapping, notes []string) {
	prefix := Prefix + server + "__"
	seen := map[string]bool{}
	taken := map[string]string{}
	var plain, hashed []string
	for _, r := range remote {
		switch {
		case r == "":
			notes = append(notes, "a tool with an empty name was dropped")
			continue
		case seen[r]:
			notes = append(notes, fmt.Sprintf("the tool %q is listed twice; the first is kept", r))
			continue
		}
		seen[r] = true
		if validName(prefix + r) {
			plain = append(plain, r)
		} else {
			hashed = append(hashed, r)
		}
	}
	for _, r := range plain {
		taken[prefix+r] = r
	}
	for _, r := range hashed {
		name := hashedName(prefix, r)
		if other, ok := taken[name]; ok {
			notes = append(notes, fmt.Sprintf("the tool %q maps to %s, which the tool %q already has; it was dropped", r, name, other))
			continue
		}
		taken[name] = r
	}
	byRemote := make(map[string]string, len(taken))
	for name, r := range taken {
		byRemote[r] = name
	}
	for _, r := range remote {
		name, ok := byRemote[r]
		if !ok {
			continue
		}
		delete(byRemote, r)
		if tool.IsBuiltin(name) {
			// The prefix rules it out; the guard stays with the rule.
			notes = append(notes, fmt.Sprintf("the tool %q would shadow the built-in %s; it was dropped", r, name))
			continue
		}
		out = append(out, mapping{Remote: r, Name: name})
	}
	return out, notes
}

// hashedName is prefix plus r made valid, cut to fit, with r's hash.
func hashedName(prefix, r string) string {
	sum := sha256.Sum256([]byte(r))
	h := hex.EncodeToString(sum[:4])
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		if nameByte(r[i]) {
			b.WriteByte(r[i])
		} else {
			b.WriteByte('_')
		}
	}
	room := MaxNameLen - len(prefix) - 1 - len(h)
	s := b.String()
	if len(s) > room {
		s = s[:room]
	}
	return prefix + s + "_" + h
}
