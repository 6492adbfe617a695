package tree_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tree"
)

var (
	patterns = map[policy.Act][]string{
		policy.Read:  {"**", "src/**", "src/*.go", "secret/**", "*.md", "docs/**", "**/*.env"},
		policy.Write: {"**", "src/**", "src/*.go", "secret/**", "*.md", "docs/**", "**/*.env"},
		policy.Exec:  {"go", "go test*", "rm*", "sh", "python3*"},
		policy.Net:   {"example.com:443", "*.example.com:*", "evil.test:80", "*"},
	}
	targets = map[policy.Act][]string{
		policy.Read:  {"src/a.go", "secret/k", "README.md", "docs/x/y.md", ".env", "a/b/.env"},
		policy.Write: {"src/a.go", "secret/k", "README.md", "docs/x/y.md", ".env"},
		policy.Exec:  {"go", "go test ./...", "rm -rf x", "sh", "python3"},
		policy.Net:   {"example.com:443", "api.example.com:443", "evil.test:80"},
	}
	effects = []policy.Effect{policy.Allow, policy.Ask, policy.Deny}
)

func randomPolicy(rng *rand.Rand) *policy.Policy {
	if rng.IntN(5) == 0 {
		return nil // no policy
	}
	pick := func() policy.Effect { return effects[rng.IntN(len(effects))] }
	p := &policy.Policy{Version: policy.Version, Defaults: policy.Defaults{Read: pick(), Write: pick(), Exec: pick(), Net: pick()}}
	var rules []policy.Rule
	for range rng.IntN(6) {
		act := policy.Acts()[rng.IntN(4)]
		rules = append(rules, policy.Rule{Act: act, Effect: pick(), Pattern: patterns[act][rng.IntN(len(patterns[act]))]})
	}
	if len(rules) > 0 {
		p.Layers = []policy.Layer{{Name: "project", Rules: rules}}
	}
	return p
}

func randomDeny(rng *rand.Rand) tree.Deny {
	var d tree.Deny
	for range rng.IntN(4) {
		act := policy.Acts()[rng.IntN(4)]
		p := patterns[act][rng.IntN(len(patterns[act]))]
		switch act {
		case policy.Read:
			d.Read = append(d.Read, p)
		case policy.Write:
			d.Write = append(d.Write, p)
		case policy.Exec:
			d.Exec = append(d.Exec, p)
		default:
			d.Net = append(d.Net, p)
		}
	}
	return d
}

func effect(p *policy.Policy, act policy.Act, target string) policy.Effect {
	if p == nil {
		return policy.Allow
	}
	return p.Explain(act, target).Effect
}

// widening is an agent whose verdict on an action is less strict than
// an ancestor's.
type widening struct {
	trial, depth, ancestor int
	act                    policy.Act
	target                 string
	got, anc               policy.Effect
}

func (w *widening) Error() string {
	return fmt.Sprintf("trial %d: agent at depth %d %ss %s %q, which its ancestor at depth %d does as %s",
		w.trial, w.depth, w.got, w.act, w.target, w.ancestor, w.anc)
}

// narrowingFault spawns random trees of policies with narrow, each child
// from its parent's policy and random denies, and returns the first
// agent whose boundary is wrong: it widens an ancestor's (a *widening),
// drops a deny it was spawned with, or does not survive its JSON form.
// The trees are the same on every call.
func narrowingFault(narrow func(*policy.Policy, tree.Deny) *policy.Policy) error {
	rng := rand.New(rand.NewPCG(12, 2026))
	for trial := range 2000 {
		chain := []*policy.Policy{randomPolicy(rng)}
		var denies []tree.Deny
		for depth := 1 + rng.IntN(4); len(chain) <= depth; {
			d := randomDeny(rng)
			child := narrow(chain[len(chain)-1], d)
			if child != nil {
				if err := child.Validate(); err != nil {
					return fmt.Errorf("trial %d: a narrowed policy does not validate: %v", trial, err)
				}
				data, err := json.Marshal(child)
				if err != nil {
					return err
				}
				back, err := policy.Parse(data)
				if err != nil {
					return fmt.Errorf("trial %d: a narrowed policy does not read back: %v", trial, err)
				}
				child = &back
			}
			chain = append(chain, child)
			denies = append(denies, d)
		}
		for _, act := range policy.Acts() {
			for _, target := range targets[act] {
				for i := 1; i < len(chain); i++ {
					got := effect(chain[i], act, target)
					for j := range i {
						anc := effect(chain[j], act, target)
						if policy.Stricter(got, anc) != got {
							return &widening{trial: trial, depth: i, ancestor: j, act: act, target: target, got: got, anc: anc}
						}
					}
					// A deny it was spawned with holds.
					own := policy.Policy{Version: policy.Version, Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Allow, Net: policy.Allow},
						Layers: []policy.Layer{{Name: "spawn", Rules: denyRules(denies[i-1])}}}
					if own.Explain(act, target).Effect == policy.Deny && got != policy.Deny {
						return fmt.Errorf("trial %d: depth %d was spawned denying %s %q and gets %s", trial, i, act, target, got)
					}
				}
			}
		}
	}
	return nil
}

// A child can never hold an allow its parent lacks, at any depth: over
// random trees of policies, every agent's verdict on every action is at
// least as strict as each of its ancestors', its own denies hold, and
// the narrowed policy survives its JSON form (as a resumed tree reads it
// back from the store).
func TestNarrowNeverWidens(t *testing.T) {
	if err := narrowingFault(tree.Narrow); err != nil {
		t.Fatal(err)
	}
}

func denyRules(d tree.Deny) []policy.Rule {
	var out []policy.Rule
	for act, ps := range map[policy.Act][]string{policy.Read: d.Read, policy.Write: d.Write, policy.Exec: d.Exec, policy.Net: d.Net} {
		for _, p := range ps {
			out = append(out, policy.Rule{Act: act, Effect: policy.Deny, Pattern: p})
		}
	}
	return out
}

// The negative control: the same check over the same trees, with
// Narrow's containment switched off (a child's policy is its own denies
// alone, as a naive spawn would store it), reports a child that allows
// what an ancestor does not.
func TestUncontainedChildWidens(t *testing.T) {
	err := narrowingFault(tree.NarrowUncontained)
	var w *widening
	if !errors.As(err, &w) {
		t.Fatalf("without containment the check found no widening (%v): it cannot see one", err)
	}
	t.Logf("without containment: %v", err)
}
