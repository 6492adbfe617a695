package tree

import (
	"encoding/json"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// The tools a tree offers its agents.
const (
	// SpawnTool starts a child agent.
	SpawnTool = "spawn_agent"
	// CollectTool waits for children started in the background and
	// returns their results.
	CollectTool = "collect_agents"
)

// IsTool reports whether name is one of the tree's tools.
func IsTool(name string) bool { return name == SpawnTool || name == CollectTool }

// Deny narrows a child's boundary: patterns, in the policy's syntax, of
// what the child may not do even where its parent may.
type Deny struct {
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	Exec  []string `json:"exec,omitempty"`
	Net   []string `json:"net,omitempty"`
}

// Empty reports whether d denies nothing.
func (d Deny) Empty() bool {
	return len(d.Read)+len(d.Write)+len(d.Exec)+len(d.Net) == 0
}

// Narrow returns a child's policy: its parent's, contained
// ([policy.Contain]), with d's denies as the child's own rules. The
// result never allows what parent does not, at any depth. A nil parent
// (a run with no policy) and an empty d give nil, which allows what the
// workspace confinement allows, as the parent does.
func Narrow(parent *policy.Policy, d Deny) *policy.Policy { return narrow(parent, d, true) }

// narrow is Narrow; with contain false the child's policy is its own
// rules alone, its parent's dropped: containment switched off, which
// only the negative control of the tests asks for (export_test.go).
func narrow(parent *policy.Policy, d Deny, contain bool) *policy.Policy {
	if parent == nil && d.Empty() {
		return nil
	}
	own := policy.Policy{Version: policy.Version,
		Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Allow, Net: policy.Allow}}
	var rules []policy.Rule
	add := func(act policy.Act, patterns []string) {
		for _, p := range patterns {
			rules = append(rules, policy.Rule{Act: act, Effect: policy.Deny, Pattern: p})
		}
	}
	add(policy.Read, d.Read)
	add(policy.Write, d.Write)
	add(policy.Exec, d.Exec)
	add(policy.Net, d.Net)
	if len(rules) > 0 {
		own.Layers = []policy.Layer{{Name: "spawn", Rules: rules}}
	}
	if parent == nil || !contain {
		return &own
	}
	p := policy.Contain(*parent, own)
	return &p
}

// Specs returns the specs of the tree's tools: spawn_agent when the agent
// may spawn, and collect_agents always.
func Specs(spawn bool) []provider.ToolSpec {
	collect := provider.ToolSpec{Name: CollectTool,
		Description: "Wait for child agents you started with wait=false, and get each one's outcome, its final answer or reason, and the files it changed. " +
			"Without agents, waits for every child not yet collected. Your own turn waits meanwhile; your children keep running.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"agents":{"type":"array","items":{"type":"string"},"description":"the agent paths (as spawn_agent returned them) to wait for; omit for all not yet collected"}` +
			`},"additionalProperties":false}`)}
	if !spawn {
		return []provider.ToolSpec{collect}
	}
	return []provider.ToolSpec{{Name: SpawnTool,
		Description: "Start a child agent on a sub-task in the same workspace. It runs the same tools under your boundary, narrowed by deny, and its spend is drawn from the tree's one ceiling. " +
			"With wait=true (the default) your turn waits for it and gets its outcome, final answer and the files it changed; with wait=false it runs in the background and you collect it later with collect_agents. " +
			"A spawn past the tree's agent count, depth or spend ceiling is refused, naming the cap; one past the concurrency cap waits in a queue. " +
			"Children share files with you and each other: a write over a file another agent changed since you read it is refused as a conflict, so read before you write.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"goal":{"type":"string","description":"the child's task, self-contained: it sees nothing of your conversation"},` +
			`"verification":{"type":"array","items":{"type":"object"},"description":"checks that decide the child's success, in the task contract's form (for example {\"kind\":\"workspace_file_contains\",\"file\":\"a.txt\",\"text\":\"done\"}); omit for a child that ends when it answers"},` +
			`"budgets":{"type":"object","properties":{"max_steps":{"type":"integer"},"max_tokens":{"type":"integer"},"max_cost_usd":{"type":"number"},"time":{"type":"string"}},"additionalProperties":false,"description":"tighter budgets for the child; cut to what the tree has left"},` +
			`"deny":{"type":"object","properties":{"read":{"type":"array","items":{"type":"string"}},"write":{"type":"array","items":{"type":"string"}},"exec":{"type":"array","items":{"type":"string"}},"net":{"type":"array","items":{"type":"string"}}},"additionalProperties":false,"description":"patterns the child may not read, write, run or reach, beyond your own boundary"},` +
			`"wait":{"type":"boolean","description":"wait for the child's result (default true)"}` +
			`},"required":["goal"],"additionalProperties":false}`)}, collect}
}
