package mcp

import (
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/sandbox/netfloor"
)

// NetAllow returns the sandbox network allow-list ([sandbox.Network])
// that follows p's net rules, for a contained server's egress proxy: the
// pattern of every net allow rule that is a literal host or host:port and
// that p allows as a target (a deny or ask rule over it wins), and every
// "*.domain" or "*.domain:port" pattern when p has no net deny or ask rule
// at all (the proxy could not carve an exception out of it). Any other
// pattern is left out: the proxy matches hosts, not globs. A policy whose
// net default is allow still reaches only what its rules name.
func NetAllow(p policy.Policy) []string {
	var out []string
	strict := false
	var rules []policy.Rule
	for q := &p; q != nil; q = q.Within {
		for _, l := range q.Layers {
			for _, r := range l.Rules {
				if r.Act != policy.Net {
					continue
				}
				if r.Effect != policy.Allow {
					strict = true
				}
				rules = append(rules, r)
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Effect != policy.Allow || seen[r.Pattern] {
			continue
		}
		host, port, _ := strings.Cut(r.Pattern, ":")
		if port != "" && !digits(port) {
			continue
		}
		wild := strings.HasPrefix(host, "*.")
		name := strings.TrimPrefix(host, "*.")
		if canon, err := netfloor.Canonical(name); err != nil || canon != strings.ToLower(name) {
			continue
		}
		switch {
		case wild && strict:
			continue
		case !wild && p.Explain(policy.Net, r.Pattern).Effect != policy.Allow:
			continue
		}
		seen[r.Pattern] = true
		out = append(out, r.Pattern)
	}
	return out
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
