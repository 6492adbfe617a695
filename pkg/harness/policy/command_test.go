package policy

import (
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"mvdan.cc/sh/v3/syntax"
)

// sysResolver resolves like a sandbox whose system PATH holds /usr/bin and
// /bin: /usr/bin/git and /bin/git are the system's git.
func sysResolver(p string) (name, file string, system bool) {
	if !strings.Contains(p, "/") {
		return p, "/usr/bin/" + p, true
	}
	clean := path.Clean(p)
	base := path.Base(clean)
	return base, clean, clean == "/usr/bin/"+base || clean == "/bin/"+base
}

// denyPolicy allows every command by default and denies a few: only the
// deny rules stand between a spelling and a run.
func denyPolicy() Policy {
	return Policy{Version: 1, Defaults: Defaults{Read: Allow, Write: Allow, Exec: Allow, Net: Deny},
		Layers: []Layer{layer("project",
			rule(Exec, Deny, "git push*"), rule(Exec, Deny, "curl"), rule(Exec, Ask, "cargo publish*"))}}
}

func TestCommandInvocations(t *testing.T) {
	type inv struct {
		Line   string
		Opaque bool
		System bool
		Open   bool
	}
	tests := []struct {
		argv []string
		want []inv
	}{
		{[]string{"go", "test", "./..."}, []inv{{Line: "go test ./...", System: true}}},
		{[]string{"/usr/bin/git", "status"}, []inv{{Line: "/usr/bin/git status", System: true}}},
		{[]string{"./git", "status"}, []inv{{Line: "./git status"}}},
		{[]string{"env", "A=1", "git", "push"}, []inv{{Line: "env 'A=1' git push", System: true}, {Line: "git push", System: true}}},
		{[]string{"env", "PATH=.", "git"}, []inv{{Line: "env 'PATH=.' git", System: true}, {Line: "git"}}},
		{[]string{"sh", "-c", `cd d && "gi"t push; echo ok`}, []inv{
			{Line: `sh -c 'cd d && "gi"t push; echo ok'`, System: true},
			{Line: "cd d", System: true}, {Line: "git push", System: true}, {Line: "echo ok", System: true}}},
		{[]string{"sh", "-c", `PATH=.:$PATH; go build`}, []inv{
			{Line: `sh -c 'PATH=.:$PATH; go build'`, System: true}, {Line: "go build"}}},
		{[]string{"sh", "-c", `$X push`}, []inv{
			{Line: `sh -c '$X push'`, System: true}, {Line: "$X push (a command word the policy cannot see)", Opaque: true}}},
		{[]string{"sh", "script.sh"}, []inv{
			{Line: "sh script.sh", System: true}, {Line: "sh script.sh (a script the policy cannot see)", Opaque: true}}},
		{[]string{"xargs", "-n", "1", "git"}, []inv{{Line: "xargs -n 1 git", System: true}, {Line: "git", System: true, Open: true}}},
		{[]string{"sh", "-c", `git push "$REMOTE"`}, []inv{
			{Line: `sh -c 'git push "$REMOTE"'`, System: true}, {Line: "git push", System: true, Open: true}}},
		{[]string{"bash", "-o", "pipefail", "-ec", `timeout 5 nice -n 3 git push`}, []inv{
			{Line: "bash -o pipefail -ec 'timeout 5 nice -n 3 git push'", System: true},
			{Line: "timeout 5 nice -n 3 git push", System: true}, {Line: "nice -n 3 git push", System: true},
			{Line: "git push", System: true}}},
		{[]string{"sh", "-c", "command -v git"}, []inv{{Line: "sh -c 'command -v git'", System: true}, {Line: "command -v git", System: true}}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			var got []inv
			for _, i := range commandOf(tt.argv, sysResolver) {
				got = append(got, inv{Line: i.line, Opaque: i.opaque, System: i.system, Open: i.open})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("invocations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExplainArgv(t *testing.T) {
	p := denyPolicy()
	p.Layers = append(p.Layers, layer("tools", rule(Exec, Allow, "go"), rule(Exec, Allow, "cargo test*")))
	p.Defaults.Exec = Ask
	tests := []struct {
		argv    []string
		effect  Effect
		rule    string
		command string
	}{
		{[]string{"go", "build"}, Allow, "go", ""},
		{[]string{"/usr/bin/go", "build"}, Allow, "go", ""},
		// A program the agent may have built is not the system's go.
		{[]string{"./go", "build"}, Ask, "", ""},
		{[]string{"tools/go"}, Ask, "", ""},
		{[]string{"/tmp/evil/go"}, Ask, "", ""},
		{[]string{"sh", "-c", "PATH=.:$PATH go build"}, Ask, "", ""},
		{[]string{"env", "PATH=/work", "go"}, Ask, "", ""},
		// Whole-argv rules.
		{[]string{"cargo", "test", "--release"}, Allow, "cargo test*", ""},
		{[]string{"cargo", "publish", "--dry-run"}, Ask, "cargo publish*", ""},
		{[]string{"git", "push", "origin", "main"}, Deny, "git push*", ""},
		{[]string{"git", "status"}, Ask, "", ""},
		// The strictest program of the command decides, and is named.
		{[]string{"sh", "-c", "go vet && git push"}, Deny, "git push*", "git push"},
		{[]string{"env", "curl", "x"}, Deny, "curl", "curl x"},
		// Nothing the policy cannot see is allowed, and a deny takes it.
		{[]string{"sh", "-c", "eval go build"}, Deny, "git push*", "eval go build (eval runs code the policy cannot see)"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			v := p.ExplainArgv(tt.argv, sysResolver)
			if v.Effect != tt.effect || v.Rule != tt.rule || v.Command != tt.command {
				t.Errorf("ExplainArgv = %s / rule %q / command %q; want %s / %q / %q", v.Effect, v.Rule, v.Command, tt.effect, tt.rule, tt.command)
			}
			if v.Target != Quote(tt.argv) || v.Act != Exec {
				t.Errorf("verdict names %s %q", v.Act, v.Target)
			}
		})
	}
}

// spelling generates argv spellings of the command words that a shell,
// a wrapper or a path could use to start it.
type spelling struct{ r *rand.Rand }

// program spells a program name.
func (s spelling) program(name string) string {
	switch s.r.IntN(6) {
	case 0:
		return "/usr/bin/" + name
	case 1:
		return "./" + name
	case 2:
		return "/tmp/x/../bin/" + name
	case 3:
		return "//usr//bin//" + name
	}
	return name
}

// quote spells a word for a shell script, in pieces quoted differently.
func (s spelling) quote(w string) string {
	var b strings.Builder
	for i := 0; i < len(w); {
		n := 1 + s.r.IntN(len(w)-i)
		piece := w[i : i+n]
		i += n
		switch s.r.IntN(6) {
		case 0:
			b.WriteString("'" + strings.ReplaceAll(piece, "'", `'\''`) + "'")
		case 1:
			b.WriteString(`"`)
			for _, c := range piece {
				if strings.ContainsRune("\"\\$`", c) {
					b.WriteByte('\\')
				}
				b.WriteRune(c)
			}
			b.WriteString(`"`)
		case 2:
			for _, c := range piece {
				b.WriteString(`\` + string(c))
			}
		case 3:
			b.WriteString("$'")
			for _, c := range []byte(piece) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
			b.WriteString("'")
		default:
			q, err := syntax.Quote(piece, syntax.LangBash)
			if err != nil {
				panic(err)
			}
			b.WriteString(q)
		}
	}
	return b.String()
}

// argv spells words (a program and its arguments) at nesting depth d.
func (s spelling) argv(words []string, d int) []string {
	prog := append([]string{s.program(words[0])}, words[1:]...)
	if d == 0 {
		return prog
	}
	switch s.r.IntN(8) {
	case 0:
		return append([]string{"env", "X=1", "-u", "HOME"}, s.argv(words, d-1)...)
	case 1:
		return append([]string{"nice", "-n", "7"}, s.argv(words, d-1)...)
	case 2:
		return append([]string{"timeout", "-k", "1", "30s"}, s.argv(words, d-1)...)
	case 3:
		return append([]string{"nohup"}, s.argv(words, d-1)...)
	case 4, 5, 6:
		inner := s.argv(words, d-1)
		quoted := make([]string, len(inner))
		for i, w := range inner {
			quoted[i] = s.quote(w)
		}
		script := strings.Join(quoted, " ")
		switch s.r.IntN(5) {
		case 0:
			script = "cd /tmp && " + script
		case 1:
			script = "true; " + script + " || exit 1"
		case 2:
			script = "A=b " + script
		case 3:
			script = "exec " + script
		}
		shell := []string{"sh", "bash", "dash", "/bin/sh"}[s.r.IntN(4)]
		opts := [][]string{{"-c"}, {"-ec"}, {"-o", "pipefail", "-c"}, {"-lc"}}[s.r.IntN(4)]
		return append(append([]string{shell}, opts...), script)
	}
	return append([]string{"command"}, s.argv(words, d-1)...)
}

// naive is how the exec policy judged a command before: argv[0]'s last
// path segment against the program patterns only.
func naive(p Policy, argv []string) Effect {
	return p.Explain(Exec, path.Base(argv[0])).Effect
}

// TestNoSpellingSlipsPastADeny spells denied commands thousands of ways
// (paths, quoting, env and other wrappers, sh -c at any depth) and checks
// that none is allowed. The negative control is the naive argv[0] check,
// which the same spellings get past.
func TestNoSpellingSlipsPastADeny(t *testing.T) {
	p := denyPolicy()
	r := rand.New(rand.NewPCG(1, 2))
	s := spelling{r}
	denied := [][]string{
		{"git", "push", "origin", "main"}, {"git", "push"}, {"curl", "https://example.com"}, {"curl"},
	}
	naivePassed := 0
	const n = 4000
	for i := range n {
		words := denied[i%len(denied)]
		argv := s.argv(words, r.IntN(4))
		if v := p.ExplainArgv(argv, sysResolver); v.Effect != Deny {
			t.Fatalf("spelling %q of %q: %s", argv, words, v)
		}
		if v := p.ExplainArgv(argv, nil); v.Effect != Deny {
			t.Fatalf("spelling %q of %q without a resolver: %s", argv, words, v)
		}
		if naive(p, argv) == Allow {
			naivePassed++
		}
	}
	if naivePassed < n/2 {
		t.Fatalf("negative control: the naive check let only %d of %d spellings through; the generator is too tame", naivePassed, n)
	}
	t.Logf("the naive argv[0] check allowed %d of %d spellings of denied commands", naivePassed, n)
}

// TestAllowIsExact spells a program the agent could have built so that
// it looks like an allowed one, and checks that the allow never reaches
// it; and that the system's program, however it is spelled, is allowed.
func TestAllowIsExact(t *testing.T) {
	p := Policy{Version: 1, Defaults: Defaults{Read: Allow, Write: Allow, Exec: Deny, Net: Deny},
		Layers: []Layer{layer("tools", rule(Exec, Allow, "go"), rule(Exec, Allow, "sh"), rule(Exec, Allow, "env"))}}
	for _, argv := range [][]string{
		{"./go"}, {"tools/go", "build"}, {"/tmp/evil/go"}, {"../go"},
		{"sh", "-c", "./go test"}, {"sh", "-c", "PATH=. go"}, {"sh", "-c", "export PATH=/work:$PATH; go"},
		{"env", "PATH=/work", "go"}, {"sh", "-c", "$GO build"}, {"sh", "-c", "g? build"}, {"sh", "-c", "{g,x}o"},
	} {
		if v := p.ExplainArgv(argv, sysResolver); v.Effect == Allow {
			t.Errorf("%q is allowed: %s", argv, v)
		}
	}
	for _, argv := range [][]string{
		{"go", "build"}, {"/usr/bin/go", "vet"}, {"sh", "-c", `"g"o test ./... && /bin/go vet`}, {"env", "CGO_ENABLED=0", "go", "build"},
	} {
		if v := p.ExplainArgv(argv, sysResolver); v.Effect != Allow {
			t.Errorf("%q is not allowed: %s", argv, v)
		}
	}
}

func TestWildcard(t *testing.T) {
	for _, tt := range []struct {
		p, s string
		want bool
	}{
		{"test*", "test --release ./...", true}, {"test*", "tes", false}, {"*", "", true},
		{"a?c", "abc", true}, {"a?c", "ac", false}, {`a\*`, "a*", true}, {`a\*`, "ab", false},
		{"*b*b", "abab", true}, {"push *", "push origin", true}, {"push *", "pushx", false},
	} {
		if got := wildcard(tt.p, tt.s); got != tt.want {
			t.Errorf("wildcard(%q, %q) = %v", tt.p, tt.s, got)
		}
	}
}

func TestLiteralExec(t *testing.T) {
	for _, argv := range [][]string{{"go", "test", "./..."}, {"git", "commit", "-m", "a * b?"}, {"/usr/bin/x[1]"}} {
		target := Quote(argv)
		r := Rule{Act: Exec, Effect: Allow, Pattern: Literal(Exec, target)}
		if err := r.Validate(); err != nil {
			t.Fatalf("Literal(%q) = %q: %v", target, r.Pattern, err)
		}
		p := Policy{Version: 1, Defaults: Defaults{Read: Allow, Write: Allow, Exec: Deny, Net: Deny}, Layers: []Layer{layer("l", r)}}
		if v := p.Explain(Exec, target); v.Effect != Allow {
			t.Errorf("Literal(%q) = %q does not match it: %s", target, r.Pattern, v)
		}
		if v := p.Explain(Exec, target+" more"); v.Effect == Allow {
			t.Errorf("Literal(%q) = %q matches more arguments", target, r.Pattern)
		}
	}
}

func FuzzExplainArgv(f *testing.F) {
	f.Add("sh\x00-c\x00git push", "git push*")
	f.Add("env\x00A=1\x00/usr/bin/git\x00push", "git")
	f.Add("bash\x00-c\x00$(x) y; eval z", "*")
	p0 := denyPolicy()
	f.Fuzz(func(t *testing.T, joined, pattern string) {
		argv := strings.Split(joined, "\x00")
		v := p0.ExplainArgv(argv, sysResolver)
		if v.Act != Exec || !v.Effect.valid() {
			t.Fatalf("bad verdict %+v", v)
		}
		// Quote is undone by a shell's word splitting.
		if !strings.Contains(joined, "\x00\x00") && joined != "" {
			if words, ok := splitWords(Quote(argv)); ok && !cmp.Equal(words, argv) {
				t.Fatalf("splitWords(Quote(%q)) = %q", argv, words)
			}
		}
		r := Rule{Act: Exec, Effect: Deny, Pattern: pattern}
		if r.Validate() != nil {
			return
		}
		p := Policy{Version: 1, Defaults: Defaults{Read: Allow, Write: Allow, Exec: Allow, Net: Deny}, Layers: []Layer{layer("l", r)}}
		// A deny that matches the command run directly also matches it
		// wrapped in env and in sh -c.
		if p.ExplainArgv(argv, sysResolver).Effect == Deny {
			if e := p.ExplainArgv(append([]string{"env"}, argv...), sysResolver).Effect; e != Deny && argv[0] != "" && !strings.Contains(argv[0], "=") && !strings.HasPrefix(argv[0], "-") {
				t.Fatalf("deny %q holds for %q but not under env: %s", pattern, argv, e)
			}
		}
	})
}

// Commands judged at once (sibling agents) share nothing: under the race
// detector this failed while the shell's word expansion was given a nil
// config, which mvdan.cc/sh fills in shared.
func TestExplainArgvConcurrently(t *testing.T) {
	p := denyPolicy()
	p.Layers = append(p.Layers, layer("tools", rule(Exec, Allow, "go")))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				if v := p.ExplainArgv([]string{"sh", "-c", fmt.Sprintf(`go build "./x%d" 'y'`, i)}, sysResolver); v.Effect != Allow {
					t.Errorf("%+v", v)
					return
				}
			}
		})
	}
	wg.Wait()
}
