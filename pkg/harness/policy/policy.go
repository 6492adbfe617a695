// Package policy is the permission boundary: layered allow, ask and deny
// rules over four acts — read and write of workspace paths, exec of a
// program or namespaced tool, and net connections to a host.
//
// Evaluation runs over the whole stack of layers: any matching deny wins;
// else any matching ask; else any matching allow; else the act's default.
// Specificity does not matter, so a rule can never be shadowed by a more
// specific one in another layer. [Policy.Explain] returns the verdict with
// the rule and layer that decided it, and it is the same function the
// tools enforce with.
//
// A Policy is plain data with a versioned JSON form:
//
//	{"version": 1,
//	 "defaults": {"read": "allow", "write": "ask", "exec": "ask", "net": "deny"},
//	 "layers": [{"name": "project", "rules": [
//	     {"act": "write", "effect": "deny", "pattern": "migrations/**"},
//	     {"act": "net", "effect": "allow", "pattern": "*.internal.example:443"}]}]}
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Version is the JSON form this code writes and the newest it reads.
const Version = 1

// Act is a kind of action.
type Act string

const (
	// Read is reading a workspace path (slash-separated, relative).
	Read Act = "read"
	// Write is creating or changing a workspace path.
	Write Act = "write"
	// Exec is running a command (an argv, judged by every program it
	// would start: see [Policy.ExplainArgv]) or calling a namespaced tool
	// such as mcp__files__delete.
	Exec Act = "exec"
	// Net is opening a connection to host or host:port.
	Net Act = "net"
)

// Acts lists every act.
func Acts() []Act { return []Act{Read, Write, Exec, Net} }

func (a Act) valid() bool { return a == Read || a == Write || a == Exec || a == Net }

// Effect is what a rule or a default decides.
type Effect string

const (
	// Allow lets the action happen.
	Allow Effect = "allow"
	// Ask sends the action to the approver.
	Ask Effect = "ask"
	// Deny refuses the action; it never reaches the approver.
	Deny Effect = "deny"
)

func (e Effect) valid() bool { return e == Allow || e == Ask || e == Deny }

// strictness orders effects: allow < ask < deny.
func (e Effect) strictness() int {
	switch e {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2
}

// Stricter returns the stricter of a and b.
func Stricter(a, b Effect) Effect {
	if b.strictness() > a.strictness() {
		return b
	}
	return a
}

// Rule decides one act for the targets its pattern matches.
//
// Patterns are doublestar globs (github.com/bmatcuk/doublestar/v4): "*"
// stays within one path segment, "**" crosses segments, "?", character
// classes and {a,b} alternatives work as in a shell. A path pattern
// without a "/" also matches the last segment of a path, so ".env"
// matches "config/.env"; a path pattern that starts with "/" is anchored
// at the workspace root, so "/main.go" matches "main.go" and not
// "cmd/main.go". Net targets are matched as "host:port" and as "host",
// lower-cased.
//
// Exec patterns name a program, optionally followed by arguments:
// "cargo", "cargo test*", "git push*", "/usr/bin/*", "mcp__files__*". The
// program part is a glob. A bare one ("go") in an allow rule matches only
// the program that name finds on the sandbox's system PATH — never
// "./go", "tools/go" or "/tmp/x/go", which could be a file the agent
// wrote; in a deny or ask rule it matches a program of that name however
// it is spelled. A program part with a "/" matches the program's path.
// The arguments part, after the first space, is a wildcard over the
// arguments joined by single spaces, in which "*" matches anything
// (spaces and slashes included) and "?" one character: "cargo test*"
// allows "cargo test --release ./...". A pattern without arguments
// matches the program with any arguments.
type Rule struct {
	Act     Act    `json:"act"`
	Effect  Effect `json:"effect"`
	Pattern string `json:"pattern"`
}

// Layer is a named group of rules, such as "builtin-secrets", "project"
// or "provider". Names appear in every verdict.
type Layer struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Defaults are the effects of actions no rule matches.
type Defaults struct {
	Read  Effect `json:"read"`
	Write Effect `json:"write"`
	Exec  Effect `json:"exec"`
	// Net defaults to deny when absent from the JSON form.
	Net Effect `json:"net"`
}

func (d Defaults) of(a Act) Effect {
	switch a {
	case Read:
		return d.Read
	case Write:
		return d.Write
	case Exec:
		return d.Exec
	}
	return d.Net
}

// Policy is a stack of layers over per-act defaults. The zero Policy is
// not valid; start from [Default] or [Permissive], or parse one.
type Policy struct {
	Version  int      `json:"version"`
	Defaults Defaults `json:"defaults"`
	Layers   []Layer  `json:"layers,omitempty"`
	// Within, when set, is the policy this one is contained in (see
	// [Contain]): every verdict is the stricter of this policy's own and
	// Within's.
	Within *Policy `json:"within,omitempty"`
}

// Verdict is an evaluation's answer and its reason.
type Verdict struct {
	Act    Act    `json:"act"`
	Target string `json:"target"`
	Effect Effect `json:"effect"`
	// Rule is the pattern of the rule that decided, and Layer its layer;
	// both are empty when the act's default decided.
	Rule  string `json:"rule,omitempty"`
	Layer string `json:"layer,omitempty"`
	// Command is, for an exec, the command within the target that
	// decided when it is not the whole target: a command of a shell
	// script, or the command a wrapper such as env runs.
	Command string `json:"command,omitempty"`
}

// String says what decided, the way refusals name it.
func (v Verdict) String() string {
	s := fmt.Sprintf("%s %s: %s by rule %q in layer %q", v.Act, v.Target, v.Effect, v.Rule, v.Layer)
	if v.Rule == "" {
		s = fmt.Sprintf("%s %s: %s by the %s default", v.Act, v.Target, v.Effect, v.Act)
	}
	if v.Command != "" {
		s += " (for " + v.Command + ")"
	}
	return s
}

// Explain evaluates act on target: deny rules first across every layer,
// then ask, then allow, then the act's default. For a contained policy the
// verdict is the stricter of its own and its Within's; on a tie, Within's
// reason is given, as the outer boundary.
//
// An exec target is a command line: words separated by spaces, quoted as
// in a shell. It is judged as [Policy.ExplainArgv] judges its words with
// no Resolver.
func (p Policy) Explain(act Act, target string) Verdict {
	if act == Exec {
		return p.explainCommand(commandLine(target), target)
	}
	t := newTarget(act, target)
	return p.explain(act, target, func(r Rule) bool { return t.matches(r.Pattern) })
}

// ExplainArgv evaluates an exec of argv: every program the command would
// start is judged — the program itself, the command a wrapper such as
// env, nice, timeout or xargs runs, every command a shell's -c script
// names — and the verdict is the strictest of theirs. A command the
// policy cannot see (a command word made from a variable, eval, a script
// read from a file or stdin) matches every deny and ask rule and no allow
// rule. resolve says which spellings of a program are the system's.
//
// The exec policy governs what the harness starts: a program it allows
// may itself run others (make, python -c, a build script), which only the
// sandbox contains.
func (p Policy) ExplainArgv(argv []string, resolve Resolver) Verdict {
	return p.explainCommand(commandOf(argv, resolve), Quote(argv))
}

func (p Policy) explainCommand(invs []invocation, target string) Verdict {
	if len(invs) == 0 {
		invs = []invocation{{opaque: true, line: "(no program)"}}
	}
	var worst Verdict
	for i, inv := range invs {
		v := p.explain(Exec, target, func(r Rule) bool { return r.matchesInvocation(inv) })
		if i == 0 || v.Effect.strictness() > worst.Effect.strictness() {
			worst = v
			worst.Command = ""
			if inv.line != target {
				worst.Command = inv.line
			}
		}
	}
	return worst
}

// explain evaluates act on target, whose rules match, through p and every
// policy it is contained in.
func (p *Policy) explain(act Act, target string, matches func(Rule) bool) Verdict {
	v := p.own(act, matches)
	v.Act, v.Target = act, target
	if p.Within != nil {
		if w := p.Within.explain(act, target, matches); w.Effect.strictness() >= v.Effect.strictness() {
			return w
		}
	}
	return v
}

// own evaluates p's own layers and defaults.
func (p *Policy) own(act Act, matches func(Rule) bool) Verdict {
	for _, effect := range [...]Effect{Deny, Ask, Allow} {
		for _, l := range p.Layers {
			for _, r := range l.Rules {
				if r.Act == act && r.Effect == effect && matches(r) {
					return Verdict{Effect: effect, Rule: r.Pattern, Layer: l.Name}
				}
			}
		}
	}
	return Verdict{Effect: p.Defaults.of(act)}
}

// Merge stacks overlay on base: base's layers, then overlay's, with each
// act's default the stricter of the two; a base contained in another
// policy stays contained in it. Every rule of base keeps its force, so an
// overlay cannot re-allow what a base rule denies or asks; an overlay's
// allow rules can grant what base leaves to its default, which is how the
// provider layer lets a run reach its model under a deny-all network
// default.
func Merge(base, overlay Policy) Policy {
	return Policy{
		Version:  Version,
		Defaults: stricterDefaults(base.Defaults, overlay.Defaults),
		Layers:   append(append([]Layer(nil), base.Layers...), overlay.Layers...),
		Within:   base.Within,
	}
}

// Contain derives a child's policy from its parent's: the child's rules
// and defaults, evaluated within the parent, so that every verdict is the
// stricter of the two. The result never allows what the parent does not,
// at any depth — not even through an ask rule of the child where the
// parent's default denies — and containing it again in the same parent
// changes no verdict.
func Contain(parent, child Policy) Policy {
	p := parent
	return Policy{Version: Version, Defaults: child.Defaults, Layers: append([]Layer(nil), child.Layers...), Within: &p}
}

func stricterDefaults(a, b Defaults) Defaults {
	return Defaults{Read: Stricter(a.Read, b.Read), Write: Stricter(a.Write, b.Write),
		Exec: Stricter(a.Exec, b.Exec), Net: Stricter(a.Net, b.Net)}
}

// Asks reports whether any verdict of p on act could be ask: a default or
// a rule, in p or a policy it is contained in.
func (p *Policy) Asks(act Act) bool {
	if p.Defaults.of(act) == Ask {
		return true
	}
	for _, l := range p.Layers {
		for _, r := range l.Rules {
			if r.Act == act && r.Effect == Ask {
				return true
			}
		}
	}
	return p.Within != nil && p.Within.Asks(act)
}

// Named returns the built-in policy a spec or a command may name instead
// of writing one out: "default" ([Default]) or "permissive"
// ([Permissive]). Any other name is an *Error naming the built-ins.
func Named(name string) (Policy, error) {
	switch name {
	case "default":
		return Default(), nil
	case "permissive":
		return Permissive(), nil
	}
	return Policy{}, &Error{Reason: fmt.Sprintf("unknown built-in policy %q; want \"default\", \"permissive\" or a policy object", name)}
}

// Permissive allows everything: no layers, every default allow. It is what
// a run without a policy gets; the workspace confinement and the sandbox
// still hold.
func Permissive() Policy {
	return Policy{Version: Version, Defaults: Defaults{Read: Allow, Write: Allow, Exec: Allow, Net: Allow}}
}

// IsPermissive reports whether p has no rules and allows every act by
// default.
func (p Policy) IsPermissive() bool {
	for _, l := range p.Layers {
		if len(l.Rules) > 0 {
			return false
		}
	}
	d := p.Defaults
	return d.Read == Allow && d.Write == Allow && d.Exec == Allow && d.Net == Allow &&
		(p.Within == nil || p.Within.IsPermissive())
}

// Secrets are the patterns Default denies reading and writing.
func Secrets() []string {
	return []string{
		".env", ".env.*", ".envrc",
		"*.pem", "*.key", "*.p12", "*.pfx", "*.keystore", "*.jks",
		"id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
		".ssh/**", "**/.ssh/**", ".aws/**", "**/.aws/**", ".gnupg/**", "**/.gnupg/**",
		".netrc", ".npmrc", ".pypirc", ".pgpass", ".git-credentials",
		"credentials.json", "secrets.json", "*.tfstate",
	}
}

// Toolchain lists the programs Default lets the verification gates run
// without asking.
func Toolchain() []string {
	return []string{"go", "rustc", "cargo", "gcc", "cc"}
}

// Default is the recommended starting point: reads allowed, writes and
// execs asked, network denied; secrets (see [Secrets]) neither read nor
// written; nothing under .git written; the verification toolchain (see
// [Toolchain]) allowed to run.
func Default() Policy {
	var secrets []Rule
	for _, p := range Secrets() {
		secrets = append(secrets, Rule{Act: Read, Effect: Deny, Pattern: p}, Rule{Act: Write, Effect: Deny, Pattern: p})
	}
	var tools []Rule
	for _, p := range Toolchain() {
		tools = append(tools, Rule{Act: Exec, Effect: Allow, Pattern: p})
	}
	return Policy{
		Version:  Version,
		Defaults: Defaults{Read: Allow, Write: Ask, Exec: Ask, Net: Deny},
		Layers: []Layer{
			{Name: "builtin-secrets", Rules: secrets},
			{Name: "builtin-git", Rules: []Rule{{Act: Write, Effect: Deny, Pattern: ".git/**"}, {Act: Write, Effect: Deny, Pattern: "**/.git/**"}}},
			{Name: "builtin-exec", Rules: tools},
		},
	}
}

// Error is a policy that is not valid. Field is the JSON path of the
// offending field, such as "layers[0].rules[2].pattern".
type Error struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field == "" {
		return "policy: " + e.Reason
	}
	return "policy: " + e.Field + ": " + e.Reason
}

// maxDepth bounds the nesting of Within.
const maxDepth = 64

// Validate checks every field of p and fills an absent version. A rule
// with an unknown act or effect, an empty or malformed pattern, an unnamed
// layer or a missing default is an *Error naming the field; nothing is
// ever a rule that silently matches nothing.
func (p *Policy) Validate() error {
	return p.validate(0)
}

func (p *Policy) validate(depth int) error {
	if p.Within != nil {
		if depth == maxDepth {
			return &Error{"within", fmt.Sprintf("nested more than %d deep", maxDepth)}
		}
		if err := p.Within.validate(depth + 1); err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Field = "within." + e.Field
			}
			return err
		}
	}
	switch {
	case p.Version == 0:
		p.Version = Version
	case p.Version < 0 || p.Version > Version:
		return &Error{"version", fmt.Sprintf("version %d is not supported; this code reads up to %d", p.Version, Version)}
	}
	for _, a := range Acts() {
		if e := p.Defaults.of(a); !e.valid() {
			return &Error{"defaults." + string(a), fmt.Sprintf("want allow, ask or deny, got %q", e)}
		}
	}
	names := map[string]bool{}
	for i, l := range p.Layers {
		field := fmt.Sprintf("layers[%d]", i)
		if strings.TrimSpace(l.Name) == "" {
			return &Error{field + ".name", "required"}
		}
		if names[l.Name] {
			return &Error{field + ".name", fmt.Sprintf("layer %q appears twice", l.Name)}
		}
		names[l.Name] = true
		for j, r := range l.Rules {
			if err := r.Validate(); err != nil {
				var e *Error
				if errors.As(err, &e) {
					e.Field = fmt.Sprintf("%s.rules[%d].%s", field, j, e.Field)
				}
				return err
			}
		}
	}
	return nil
}

// Validate checks one rule. Field in the *Error it returns is "act",
// "effect" or "pattern".
func (r *Rule) Validate() error {
	if !r.Act.valid() {
		return &Error{"act", fmt.Sprintf("want read, write, exec or net, got %q", r.Act)}
	}
	if !r.Effect.valid() {
		return &Error{"effect", fmt.Sprintf("want allow, ask or deny, got %q", r.Effect)}
	}
	if err := validPattern(r.Act, r.Pattern); err != nil {
		return &Error{"pattern", err.Error()}
	}
	return nil
}

// Parse reads a policy from its JSON form and validates it. Unknown fields
// are errors. A missing "defaults.net" means deny, so that a policy
// written before the net act existed makes no outbound connection.
func Parse(data []byte) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	p.Defaults.Net = Deny
	if err := dec.Decode(&p); err != nil {
		return Policy{}, &Error{"(json)", err.Error()}
	}
	if dec.More() {
		return Policy{}, &Error{"(json)", "trailing data after the policy"}
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}
