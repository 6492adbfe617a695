package policy

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/google/go-cmp/cmp"
)

func layer(name string, rules ...Rule) Layer { return Layer{Name: name, Rules: rules} }
func rule(a Act, e Effect, p string) Rule    { return Rule{Act: a, Effect: e, Pattern: p} }

func TestExplainOrder(t *testing.T) {
	p := Policy{Version: 1, Defaults: Defaults{Read: Allow, Write: Ask, Exec: Deny, Net: Deny},
		Layers: []Layer{
			layer("base", rule(Write, Allow, "src/**"), rule(Read, Deny, "*.pem"), rule(Write, Ask, "src/gen/**")),
			layer("project", rule(Write, Deny, "src/secret.go"), rule(Exec, Allow, "go"), rule(Net, Allow, "api.example.com:443")),
			layer("remembered", rule(Write, Allow, "src/gen/**"), rule(Read, Allow, "certs/*.pem")),
		}}
	tests := []struct {
		act    Act
		target string
		want   Verdict
	}{
		// A deny in a later layer beats an allow in an earlier one.
		{Write, "src/secret.go", Verdict{Effect: Deny, Rule: "src/secret.go", Layer: "project"}},
		// An ask rule beats an allow rule anywhere, a remembered one too.
		{Write, "src/gen/a.go", Verdict{Effect: Ask, Rule: "src/gen/**", Layer: "base"}},
		{Write, "src/main.go", Verdict{Effect: Allow, Rule: "src/**", Layer: "base"}},
		// No rule: the default.
		{Write, "README.md", Verdict{Effect: Ask}},
		{Read, "README.md", Verdict{Effect: Allow}},
		// A pattern without a slash matches the last segment at any depth,
		// and a deny beats a more specific allow.
		{Read, "certs/server.pem", Verdict{Effect: Deny, Rule: "*.pem", Layer: "base"}},
		{Read, `certs\server.pem`, Verdict{Effect: Deny, Rule: "*.pem", Layer: "base"}},
		{Read, "./server.pem", Verdict{Effect: Deny, Rule: "*.pem", Layer: "base"}},
		// exec: a bare allow pattern matches the system's program, never a
		// path that may be a file the agent wrote (ExplainArgv with a
		// Resolver recognises the system's own paths).
		{Exec, "go", Verdict{Effect: Allow, Rule: "go", Layer: "project"}},
		{Exec, "go test ./...", Verdict{Effect: Allow, Rule: "go", Layer: "project"}},
		{Exec, "/usr/local/go/bin/go", Verdict{Effect: Deny}},
		{Exec, "./go", Verdict{Effect: Deny}},
		{Exec, "gofmt", Verdict{Effect: Deny}},
		// net matches host:port, case-insensitively.
		{Net, "API.example.com:443", Verdict{Effect: Allow, Rule: "api.example.com:443", Layer: "project"}},
		{Net, "api.example.com:80", Verdict{Effect: Deny}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s", tt.act, tt.target), func(t *testing.T) {
			got := p.Explain(tt.act, tt.target)
			tt.want.Act, tt.want.Target = tt.act, tt.target
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnchoredAndLiteral(t *testing.T) {
	p := Policy{Version: 1, Defaults: Defaults{Write: Deny},
		Layers: []Layer{layer("l", rule(Write, Allow, "/main.go"), rule(Write, Allow, Literal(Write, "a[1]*.txt")))}}
	for target, want := range map[string]Effect{
		"main.go":     Allow,
		"cmd/main.go": Deny, // anchored: not at any depth
		"a[1]*.txt":   Allow,
		"a1x.txt":     Deny, // the literal's glob characters are escaped
		"b/a[1]*.txt": Deny,
	} {
		if got := p.Explain(Write, target).Effect; got != want {
			t.Errorf("Explain(write, %s) = %s, want %s", target, got, want)
		}
	}
	if got := Literal(Net, "API.Example.com:443"); got != "api.example.com:443" {
		t.Errorf("Literal(net) = %q", got)
	}
	if err := (&Rule{Act: Write, Effect: Allow, Pattern: Literal(Write, `we{ird}\name`)}).Validate(); err != nil {
		t.Errorf("a literal pattern is not valid: %v", err)
	}
}

func TestNetTargets(t *testing.T) {
	p := Policy{Version: 1, Defaults: Defaults{Net: Deny}, Layers: []Layer{layer("l",
		rule(Net, Allow, "example.com"), rule(Net, Allow, "*.corp.test:8443"), rule(Net, Allow, "::1"))}}
	for target, want := range map[string]Effect{
		"example.com":        Allow, // a bare host rule covers every port
		"example.com:443":    Allow,
		"evil.example.com":   Deny,
		"a.b.corp.test:8443": Allow,
		"a.corp.test:443":    Deny,
		"corp.test:8443":     Deny,
		"[::1]:8080":         Allow,
	} {
		if got := p.Explain(Net, target).Effect; got != want {
			t.Errorf("Explain(net, %s) = %s, want %s", target, got, want)
		}
	}
}

func TestMerge(t *testing.T) {
	base := Policy{Version: 1, Defaults: Defaults{Read: Allow, Write: Ask, Exec: Ask, Net: Deny},
		Layers: []Layer{layer("base", rule(Write, Deny, "vendor/**"), rule(Net, Ask, "*.slow.test"))}}
	overlay := Policy{Version: 1, Defaults: Defaults{Read: Ask, Write: Allow, Exec: Allow, Net: Allow},
		Layers: []Layer{layer("provider", rule(Net, Allow, "api.example.com:443"), rule(Write, Allow, "vendor/x.go"), rule(Net, Allow, "x.slow.test"))}}
	m := Merge(base, overlay)
	if diff := cmp.Diff(Defaults{Read: Ask, Write: Ask, Exec: Ask, Net: Deny}, m.Defaults); diff != "" {
		t.Errorf("defaults are not the stricter of the two (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		act    Act
		target string
		want   Verdict
	}{
		{Net, "api.example.com:443", Verdict{Effect: Allow, Rule: "api.example.com:443", Layer: "provider"}},
		{Write, "vendor/x.go", Verdict{Effect: Deny, Rule: "vendor/**", Layer: "base"}},
		{Net, "x.slow.test", Verdict{Effect: Ask, Rule: "*.slow.test", Layer: "base"}},
		{Net, "other.test:443", Verdict{Effect: Deny}},
	} {
		got := m.Explain(tt.act, tt.target)
		tt.want.Act, tt.want.Target = tt.act, tt.target
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("merged Explain(%s, %s) (-want +got):\n%s", tt.act, tt.target, diff)
		}
	}
}

func TestContain(t *testing.T) {
	parent := Policy{Version: 1, Defaults: Defaults{Read: Allow, Write: Allow, Exec: Ask, Net: Deny},
		Layers: []Layer{layer("parent", rule(Write, Deny, ".git/**"), rule(Exec, Allow, "go"))}}
	child := Policy{Version: 1, Defaults: Defaults{Read: Allow, Write: Allow, Exec: Allow, Net: Allow},
		Layers: []Layer{layer("child", rule(Write, Deny, "docs/**"), rule(Net, Allow, "*"), rule(Exec, Allow, "rm"), rule(Write, Ask, "go.mod"))}}
	c := Contain(parent, child)
	for _, tt := range []struct {
		act    Act
		target string
		want   Effect
	}{
		{Write, "docs/a.md", Deny},     // the child's deny holds
		{Write, ".git/config", Deny},   // the parent's deny holds
		{Write, "go.mod", Ask},         // the child's ask holds
		{Net, "example.com:443", Deny}, // the child's allow is dropped; the parent's default stands
		{Exec, "rm", Ask},              // likewise
		{Exec, "go", Allow},            // the parent's allow stays
		{Write, "src/main.go", Allow},  // both defaults allow
	} {
		if got := c.Explain(tt.act, tt.target).Effect; got != tt.want {
			t.Errorf("contained Explain(%s, %s) = %s, want %s", tt.act, tt.target, got, tt.want)
		}
	}
	// Containing again changes no verdict.
	again := Contain(c, child)
	for _, target := range []string{"docs/a.md", "go.mod", "src/x", ".git/x"} {
		if a, b := c.Explain(Write, target), again.Explain(Write, target); a.Effect != b.Effect {
			t.Errorf("Contain is not idempotent on %s: %s then %s", target, a.Effect, b.Effect)
		}
	}
}

// randomPolicy builds a policy from a small alphabet of patterns, so that
// rules and targets collide often.
func randomPolicy(r *rand.Rand, name string) Policy {
	effects := []Effect{Allow, Ask, Deny}
	pick := func() Effect { return effects[r.IntN(3)] }
	p := Policy{Version: 1, Defaults: Defaults{Read: pick(), Write: pick(), Exec: pick(), Net: pick()}}
	for l := range r.IntN(4) {
		var rules []Rule
		for range r.IntN(6) {
			act := Acts()[r.IntN(4)]
			rules = append(rules, Rule{Act: act, Effect: pick(), Pattern: randomPattern(r, act)})
		}
		p.Layers = append(p.Layers, Layer{Name: fmt.Sprintf("%s%d", name, l), Rules: rules})
	}
	return p
}

var (
	pathPatterns = []string{"*", "**", "src/**", "*.go", "src/*.go", "a/b/c", "**/secret*", ".env", "src/{a,b}.go", "?.go", "docs/[a-m]*"}
	paths        = []string{"a.go", "src/a.go", "src/b.go", "src/x/c.go", "a/b/c", ".env", "cfg/.env", "docs/guide.md", "docs/z.md", "x/secret.txt", "b.go"}
	execPatterns = []string{"go", "rustc", "*", "mcp__*", "/usr/bin/*", "g?"}
	programs     = []string{"go", "/usr/bin/go", "rustc", "mcp__files__delete", "rm", "gcc"}
	netPatterns  = []string{"*", "example.com", "*.example.com", "example.com:443", "api.*:443", "10.*"}
	hosts        = []string{"example.com:443", "example.com:80", "api.example.com:443", "evil.test:443", "10.0.0.1:22", "example.com"}
)

func randomPattern(r *rand.Rand, act Act) string {
	switch act {
	case Exec:
		return execPatterns[r.IntN(len(execPatterns))]
	case Net:
		return netPatterns[r.IntN(len(netPatterns))]
	}
	return pathPatterns[r.IntN(len(pathPatterns))]
}

func targets(act Act) []string {
	switch act {
	case Exec:
		return programs
	case Net:
		return hosts
	}
	return paths
}

// Contain never allows what the parent does not, at any depth: thousands
// of random parent and child policies, contained up to four levels deep.
func TestContainNeverWidens(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := 0
	for range 3000 {
		chain := []Policy{randomPolicy(r, "root")}
		for depth := 1; depth <= 4; depth++ {
			child := randomPolicy(r, fmt.Sprintf("d%d-", depth))
			chain = append(chain, Contain(chain[depth-1], child))
			// The child's own narrowing holds too.
			for _, act := range Acts() {
				for _, target := range targets(act) {
					if got, own := chain[depth].Explain(act, target).Effect, child.Explain(act, target).Effect; got.strictness() < own.strictness() {
						t.Fatalf("contained policy is looser than the child's own on %s %s: %s vs %s", act, target, got, own)
					}
				}
			}
		}
		for depth := 1; depth < len(chain); depth++ {
			for _, act := range Acts() {
				for _, target := range targets(act) {
					cases++
					child := chain[depth].Explain(act, target).Effect
					for up := range depth {
						if anc := chain[up].Explain(act, target).Effect; child.strictness() < anc.strictness() {
							t.Fatalf("depth %d allows more than depth %d on %s %s: %s vs %s\nchild: %+v\nancestor: %+v",
								depth, up, act, target, child, anc, chain[depth], chain[up])
						}
					}
				}
			}
		}
	}
	t.Logf("%d verdicts checked", cases)
}

// Merge never lets an overlay re-allow what a base rule denies or asks,
// nor loosen a default.
func TestMergeNeverReallows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := 0
	for range 5000 {
		base, overlay := randomPolicy(r, "base"), randomPolicy(r, "over")
		m := Merge(base, overlay)
		for _, act := range Acts() {
			if m.Defaults.of(act).strictness() < base.Defaults.of(act).strictness() {
				t.Fatalf("merge loosened the %s default", act)
			}
			for _, target := range targets(act) {
				cases++
				b, got := base.Explain(act, target), m.Explain(act, target)
				if b.Rule != "" && b.Effect != Allow && got.Effect.strictness() < b.Effect.strictness() {
					t.Fatalf("merge re-allowed %s %s: base %v, merged %v", act, target, b, got)
				}
				if b.Rule == "" && got.Rule == "" && got.Effect.strictness() < b.Effect.strictness() {
					t.Fatalf("merge loosened the default for %s %s: %v then %v", act, target, b, got)
				}
			}
		}
	}
	t.Logf("%d verdicts checked", cases)
}

func TestValidate(t *testing.T) {
	good := func() Policy { p := Default(); return p }
	tests := []struct {
		name  string
		edit  func(p *Policy)
		field string
	}{
		{"unknown act", func(p *Policy) { p.Layers[0].Rules[0].Act = "delete" }, "layers[0].rules[0].act"},
		{"unknown effect", func(p *Policy) { p.Layers[1].Rules[1].Effect = "maybe" }, "layers[1].rules[1].effect"},
		{"malformed glob", func(p *Policy) { p.Layers[2].Rules[0].Pattern = "src/[a-" }, "layers[2].rules[0].pattern"},
		{"empty pattern", func(p *Policy) { p.Layers[0].Rules[3].Pattern = "" }, "layers[0].rules[3].pattern"},
		{"url as net pattern", func(p *Policy) { p.Layers = append(p.Layers, layer("x", rule(Net, Allow, "https://a.test/"))) }, "layers[3].rules[0].pattern"},
		{"climbing path pattern", func(p *Policy) { p.Layers = append(p.Layers, layer("x", rule(Write, Deny, "../etc/**"))) }, "layers[3].rules[0].pattern"},
		{"unnamed layer", func(p *Policy) { p.Layers[1].Name = "" }, "layers[1].name"},
		{"duplicate layer", func(p *Policy) { p.Layers[1].Name = p.Layers[0].Name }, "layers[1].name"},
		{"missing default", func(p *Policy) { p.Defaults.Exec = "" }, "defaults.exec"},
		{"future version", func(p *Policy) { p.Version = 2 }, "version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := good()
			tt.edit(&p)
			err := p.Validate()
			var e *Error
			if !errors.As(err, &e) || e.Field != tt.field {
				t.Fatalf("Validate = %v, want an error on %s", err, tt.field)
			}
		})
	}
	for _, p := range []Policy{Default(), Permissive()} {
		if err := p.Validate(); err != nil {
			t.Errorf("a built-in policy is invalid: %v", err)
		}
	}
}

func TestDefault(t *testing.T) {
	p := Default()
	for _, tt := range []struct {
		act    Act
		target string
		want   Effect
	}{
		{Read, "main.go", Allow}, {Write, "main.go", Ask}, {Exec, "make", Ask}, {Net, "example.com:443", Deny},
		{Read, ".env", Deny}, {Read, "app/.env.local", Deny}, {Write, "deploy/server.pem", Deny},
		{Read, "home/.ssh/id_ed25519", Deny}, {Read, "id_rsa.pub", Deny}, {Write, ".aws/credentials", Deny},
		{Write, ".git/hooks/pre-commit", Deny}, {Write, "vendor/lib/.git/config", Deny}, {Read, ".git/config", Allow},
		{Exec, "go", Allow}, {Exec, "rustc", Allow}, {Exec, "/usr/bin/rustc", Ask}, {Exec, "tools/go", Ask}, {Exec, "bash", Ask},
	} {
		if got := p.Explain(tt.act, tt.target); got.Effect != tt.want {
			t.Errorf("Default Explain(%s, %s) = %v, want %s", tt.act, tt.target, got, tt.want)
		}
	}
	if !Permissive().IsPermissive() || p.IsPermissive() {
		t.Error("IsPermissive is wrong")
	}
}

var update = flag.Bool("update", false, "rewrite golden files")

// The JSON form is stable: Default encodes to the golden file and parses
// back to itself. Run with -update to rewrite the golden file.
func TestJSONGolden(t *testing.T) {
	got, err := json.MarshalIndent(Default(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "default.golden.json")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, append(got, '\n'), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimSpace(string(want)), string(got)); diff != "" {
		t.Errorf("Default's JSON (-golden +got):\n%s", diff)
	}
	back, err := Parse(want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParse(t *testing.T) {
	p, err := Parse([]byte(`{"defaults": {"read": "allow", "write": "ask", "exec": "ask"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Defaults.Net != Deny || p.Version != Version {
		t.Errorf("a policy without a net default: %+v; want net deny and the current version", p)
	}
	for name, js := range map[string]string{
		"unknown field": `{"defaults": {"read": "allow", "write": "ask", "exec": "ask"}, "layerz": []}`,
		"not json":      `{"defaults": `,
		"trailing":      `{"defaults": {"read": "allow", "write": "ask", "exec": "ask"}} []`,
		"bad glob":      `{"defaults": {"read": "allow", "write": "ask", "exec": "ask"}, "layers": [{"name": "x", "rules": [{"act": "read", "effect": "deny", "pattern": "a{b"}]}]}`,
	} {
		if _, err := Parse([]byte(js)); err == nil {
			t.Errorf("%s: Parse accepted %s", name, js)
		}
	}
}

// FuzzPolicyJSON: Parse never panics, every failure is an *Error, and an
// accepted policy encodes to JSON that parses back to the same verdicts.
func FuzzPolicyJSON(f *testing.F) {
	seed, _ := json.Marshal(Default())
	f.Add(seed)
	f.Add([]byte(`{"version":1,"defaults":{"read":"allow","write":"allow","exec":"allow","net":"allow"}}`))
	f.Add([]byte(`{"defaults":{"read":"ask","write":"deny","exec":"deny"},"layers":[{"name":"a","rules":[{"act":"net","effect":"allow","pattern":"*.x:443"}]}]}`))
	f.Add([]byte(`{"layers":[{"name":"a","rules":[{"act":"write","effect":"deny","pattern":"{a,"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error is not an *Error: %v", err)
			}
			return
		}
		enc, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(enc)
		if err != nil {
			t.Fatalf("an accepted policy does not parse back: %v\n%s", err, enc)
		}
		for _, act := range Acts() {
			for _, target := range targets(act) {
				if a, b := p.Explain(act, target), back.Explain(act, target); a != b {
					t.Fatalf("verdicts differ after a round trip: %v vs %v", a, b)
				}
			}
		}
	})
}

// FuzzMatch checks the matcher's fast paths against doublestar itself, on
// valid UTF-8.
func FuzzMatch(f *testing.F) {
	for _, p := range append(append(pathPatterns, execPatterns...), netPatterns...) {
		for _, s := range paths {
			f.Add(p, s)
		}
	}
	f.Add("*.pem", "a/b.pem")
	f.Add("src*", "src/x")
	f.Add("*", "")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		// doublestar decodes invalid UTF-8 to U+FFFD on both sides, so
		// that "\xe4" matches "\x8c"; the fast paths compare bytes.
		if !doublestar.ValidatePattern(pattern) || !utf8.ValidString(pattern) || !utf8.ValidString(s) {
			return
		}
		want, err := doublestar.Match(pattern, s)
		if err != nil {
			return
		}
		if got := match(pattern, s); got != want {
			t.Fatalf("match(%q, %q) = %v, doublestar says %v", pattern, s, got, want)
		}
	})
}
