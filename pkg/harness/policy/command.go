package policy

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"
)

// A command is judged by every program it would start. [Policy.ExplainArgv]
// turns an argv into invocations: the program itself; the command a known
// wrapper runs (env, nice, timeout, xargs, ...); and every command a shell
// script names (sh -c, bash -c, ...), parsed as the shell would parse it.
// What cannot be seen statically — a command word built from a variable,
// eval, a script read from a file or stdin — is an opaque invocation, which
// every deny and ask rule matches and no allow rule does: it could be
// anything.

// Resolver says what program a spelling in an argv runs in the sandbox:
// its name (last path segment), the file it is when known, and whether it
// is the program a bare name finds on the sandbox's system PATH (a bare
// name always is; a path is when it names that same file). A nil Resolver
// takes every bare name as a system program and every path as not one.
type Resolver func(program string) (name, file string, system bool)

// invocation is one program a command starts, as rules see it.
type invocation struct {
	// opaque: the program cannot be known (a variable, eval, a script
	// from a file). It matches every deny and ask rule and no allow rule.
	opaque bool
	// name is the program's last path segment.
	name string
	// path is the program as spelled when it has a slash (cleaned, with
	// no leading "./"), or empty for a bare name.
	path string
	// file is the file the program is, when the Resolver knows it.
	file string
	// system: the program is the one a bare name finds on the sandbox's
	// system PATH (a bare name, or a path the Resolver recognised), not a
	// file of the workspace or anywhere else.
	system bool
	// args are the arguments; open means more unknown ones may follow
	// (xargs, an argument built from a variable).
	args []string
	open bool
	// line is the invocation as a person reads it, for verdicts.
	line string
}

// maxScript bounds the shell script a command is parsed from; a longer
// one is opaque. maxNesting bounds wrappers and shells within each other.
const (
	maxScript  = 64 << 10
	maxNesting = 8
)

// commandOf returns the invocations argv would start.
func commandOf(argv []string, resolve Resolver) []invocation {
	var out []invocation
	expandArgv(argv, resolve, false, 0, &out)
	return out
}

// commandLine returns the invocations a command line written as a target
// (words separated by spaces, quoted as in a shell) would start. A target
// without spaces is one program: a registered tool's name, or a program.
func commandLine(s string) []invocation {
	if !strings.ContainsAny(s, " \t\n'\"\\") {
		return commandOf([]string{s}, nil)
	}
	words, ok := splitWords(s)
	if !ok || len(words) == 0 {
		return []invocation{{opaque: true, line: s}}
	}
	return commandOf(words, nil)
}

// SplitWords splits a command line into the words of its argv as a shell
// would, refusing a line with anything but plain and quoted words (an
// expansion, a redirection, a second command).
func SplitWords(line string) ([]string, bool) { return splitWords(line) }

// splitWords splits a line into words as a shell would, refusing anything
// but plain and quoted words.
func splitWords(s string) ([]string, bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(s), "")
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(st.Redirs) > 0 || st.Background || st.Negated || len(call.Assigns) > 0 {
		return nil, false
	}
	words := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		v, ok := staticWord(w)
		if !ok {
			return nil, false
		}
		words = append(words, v)
	}
	return words, true
}

// Quote renders argv as one line a shell would split back into the same
// words: how an exec target is shown and matched.
func Quote(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil { // a NUL byte: no shell word holds it
			q = "'" + strings.ReplaceAll(a, "\x00", "") + "'"
		}
		b.WriteString(q)
	}
	return b.String()
}

// program makes the invocation of argv[0].
func program(argv []string, resolve Resolver, pathChanged bool) invocation {
	p := argv[0]
	inv := invocation{args: argv[1:], line: Quote(argv)}
	switch {
	case resolve != nil:
		inv.name, inv.file, inv.system = resolve(p)
	case strings.Contains(p, "/"):
		inv.name = path.Base(path.Clean(p))
	default:
		inv.name, inv.system = p, true
	}
	if strings.Contains(p, "/") {
		inv.path = cleanProgram(p)
	} else if pathChanged {
		// The script set PATH: a bare name may find anything.
		inv.system, inv.file = false, ""
	}
	return inv
}

// cleanProgram cleans a program path for matching: "./x" and "x" name the
// same file.
func cleanProgram(p string) string {
	return strings.TrimPrefix(path.Clean(p), "./")
}

// expandArgv appends the invocations of argv to out.
func expandArgv(argv []string, resolve Resolver, pathChanged bool, depth int, out *[]invocation) {
	if len(argv) == 0 || argv[0] == "" {
		return
	}
	if depth > maxNesting {
		*out = append(*out, invocation{opaque: true, line: Quote(argv)})
		return
	}
	inv := program(argv, resolve, pathChanged)
	*out = append(*out, inv)
	name := inv.name
	args := argv[1:]
	switch {
	case isShell(name):
		script, ok := shellScript(args)
		switch {
		case !ok:
			*out = append(*out, invocation{opaque: true, line: inv.line + " (a script the policy cannot see)"})
		case script != "":
			expandScript(script, resolve, pathChanged, depth+1, out)
		}
	case name == "busybox" && len(args) > 0:
		expandArgv(args, resolve, pathChanged, depth+1, out)
	default:
		if w := wrapperOf(name); w != nil {
			inner, changed, open, ok := w(args)
			switch {
			case !ok:
				*out = append(*out, invocation{opaque: true, line: inv.line + " (a wrapped command the policy cannot see)"})
			case len(inner) > 0:
				before := len(*out)
				expandArgv(inner, resolve, pathChanged || changed, depth+1, out)
				if open && len(*out) > before {
					(*out)[before].open = true
				}
			}
		}
	}
}

// isShell reports whether a program name is a shell whose -c script the
// policy reads.
func isShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "posh", "yash", "rbash":
		return true
	}
	return false
}

// shellScript finds the script of a shell's -c among its arguments. ok is
// false when the shell reads a script the policy cannot see (a file,
// stdin, an interactive session) or takes options it does not know; a
// shell that runs nothing (sh --version) returns "" and true.
func shellScript(args []string) (script string, ok bool) {
	wantC := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || a == "-":
			if wantC && i+1 < len(args) {
				return args[i+1], true
			}
			return "", false
		case strings.HasPrefix(a, "--"):
			switch a {
			case "--norc", "--noprofile", "--login", "--posix", "--noediting", "--restricted", "--verbose":
				continue
			case "--version", "--help":
				return "", true
			case "--rcfile", "--init-file":
				i++
				continue
			}
			return "", false
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			for _, c := range a[1:] {
				switch c {
				case 'c':
					wantC = true
				case 'o', 'O':
					i++ // the option's argument
				case 's', 'i':
					return "", false // a script from stdin, or interactive
				}
			}
		default:
			if wantC {
				return a, true
			}
			return "", false // a script file
		}
	}
	return "", false // no script: the shell reads stdin
}

// expandScript appends the invocations a shell script names.
func expandScript(script string, resolve Resolver, pathChanged bool, depth int, out *[]invocation) {
	if len(script) > maxScript {
		*out = append(*out, invocation{opaque: true, line: "(a shell script over 64 KiB)"})
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		*out = append(*out, invocation{opaque: true, line: clipLine(script) + " (a script the shell parser refuses)"})
		return
	}
	// An assignment to PATH anywhere makes every bare name of the script
	// something other than the system's program.
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			if n.Name != nil && n.Name.Value == "PATH" {
				pathChanged = true
			}
		}
		return true
	})
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Args) == 0 {
				return true
			}
			words := make([]string, 0, len(n.Args))
			open := false
			for i, w := range n.Args {
				v, ok := staticWord(w)
				if !ok {
					if i == 0 {
						*out = append(*out, invocation{opaque: true, line: clipLine(script) + " (a command word the policy cannot see)"})
						return true
					}
					open = true
					break
				}
				words = append(words, v)
			}
			switch words[0] {
			case "eval", "source", ".", "alias", "trap", "enable", "builtin", "fc", "coproc":
				*out = append(*out, invocation{opaque: true, line: clipLine(script) + " (" + words[0] + " runs code the policy cannot see)"})
				return true
			}
			before := len(*out)
			expandArgv(words, resolve, pathChanged, depth, out)
			if open && len(*out) > before {
				// The last invocation takes the unknown arguments.
				(*out)[len(*out)-1].open = true
			}
		}
		return true
	})
}

func clipLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// staticWord returns the value of a shell word whose value is fixed by its
// text: plain, quoted or escaped characters only. A word with an expansion
// of any kind (a variable, a command substitution, a glob, braces, a
// tilde) is not static.
func staticWord(w *syntax.Word) (string, bool) {
	if w == nil || len(w.Parts) == 0 {
		return "", false
	}
	cp := *w
	if syntax.SplitBraces(&cp) {
		return "", false
	}
	for i, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if pattern.HasMeta(p.Value, 0) || (i == 0 && strings.HasPrefix(p.Value, "~")) {
				return "", false
			}
		case *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return "", false
				}
			}
		default:
			return "", false
		}
	}
	// Fields removes quotes and escapes as the shell does; with nothing
	// but literal parts it expands nothing else. Its config is fresh for
	// each call: given nil, mvdan.cc/sh fills in one it shares between
	// goroutines, a data race when two agents' commands are judged at
	// once.
	f, err := expand.Fields(&expand.Config{}, w)
	if err != nil || len(f) != 1 {
		return "", false
	}
	return f[0], true
}

// A wrapper parses the arguments of a program that runs another command:
// the command, whether it changes PATH for it, whether unknown arguments
// follow it (open), and ok false when the arguments are not understood.
type wrapper func(args []string) (inner []string, pathChanged, open, ok bool)

// wrapperOf returns the parser of a program whose argument is another
// command, or nil.
func wrapperOf(name string) wrapper {
	switch name {
	case "env":
		return envWrapper
	case "nice":
		return optsWrapper("n", "adjustment")
	case "nohup", "setsid":
		return optsWrapper("", "")
	case "exec":
		return optsWrapper("a", "")
	case "command":
		return commandWrapper
	case "time":
		return optsWrapper("fo", "format,output")
	case "stdbuf":
		return optsWrapper("ioe", "input,output,error")
	case "ionice":
		return optsWrapper("cnp", "class,classdata,pid")
	case "timeout":
		return timeoutWrapper
	case "xargs":
		return xargsWrapper
	case "sudo":
		return optsWrapper("ugCDhprRTU", "user,group,close-from,chdir,host,prompt,role,type,other-user,command-timeout")
	case "doas":
		return optsWrapper("uC", "")
	case "chrt", "taskset":
		return priorityWrapper
	case "flock":
		return flockWrapper
	case "watch":
		return watchWrapper
	}
	return nil
}

// optsWrapper parses "wrapper [options] command...": short options in
// withArg take an argument (joined or next), long ones named in longArg
// too; every other option is a flag.
func optsWrapper(withArg, longArg string) wrapper {
	long := map[string]bool{}
	for _, l := range strings.Split(longArg, ",") {
		if l != "" {
			long[l] = true
		}
	}
	return func(args []string) ([]string, bool, bool, bool) {
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--":
				return args[i+1:], false, false, true
			case strings.HasPrefix(a, "--"):
				name, _, hasVal := strings.Cut(a[2:], "=")
				if long[name] && !hasVal {
					i++
				}
			case len(a) > 1 && a[0] == '-' && !isNumber(a[1:]):
				for j, c := range a[1:] {
					if strings.ContainsRune(withArg, c) {
						if j == len(a)-2 {
							i++ // the argument is the next word
						}
						break
					}
				}
			case len(a) > 1 && a[0] == '-': // nice -10
			default:
				return args[i:], false, false, true
			}
		}
		return nil, false, false, true
	}
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// envWrapper parses env [-i] [-u NAME] [-C DIR] [NAME=VALUE]... [command].
// -S (split a string into a command) is not understood.
func envWrapper(args []string) ([]string, bool, bool, bool) {
	changed := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			rest := args[i+1:]
			for len(rest) > 0 && isAssignment(rest[0]) {
				changed = changed || strings.HasPrefix(rest[0], "PATH=")
				rest = rest[1:]
			}
			return rest, changed, false, true
		case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir":
			i++
		case strings.HasPrefix(a, "-S") || strings.HasPrefix(a, "--split-string"):
			return nil, false, false, false
		case strings.HasPrefix(a, "--unset=") || strings.HasPrefix(a, "--chdir="):
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// -i, -0, -v, --ignore-environment, ... and their clusters;
			// a cluster ending in u or C takes the next word.
			if c := a[len(a)-1]; (c == 'u' || c == 'C') && !strings.HasPrefix(a, "--") {
				i++
			}
		case isAssignment(a):
			changed = changed || strings.HasPrefix(a, "PATH=")
		default:
			return args[i:], changed, false, true
		}
	}
	return nil, changed, false, true
}

func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// commandWrapper parses command [-p] [-v|-V] command: with -v or -V it
// only looks the command up and starts nothing.
func commandWrapper(args []string) ([]string, bool, bool, bool) {
	for i, a := range args {
		switch a {
		case "-p":
		case "-v", "-V":
			return nil, false, false, true
		case "--":
			return args[i+1:], false, false, true
		default:
			return args[i:], false, false, true
		}
	}
	return nil, false, false, true
}

// timeoutWrapper parses timeout [options] DURATION command.
func timeoutWrapper(args []string) ([]string, bool, bool, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-s" || a == "--signal" || a == "-k" || a == "--kill-after":
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1:
		default:
			if i+1 < len(args) {
				return args[i+1:], false, false, true
			}
			return nil, false, false, true
		}
	}
	return nil, false, false, true
}

// xargsWrapper parses xargs [options] [command [initial-args]]: the
// command receives more arguments from its input.
func xargsWrapper(args []string) ([]string, bool, bool, bool) {
	withArg := "adEeIiLlnPs"
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return openCommand(args[i+1:])
		case strings.HasPrefix(a, "--"):
			if !strings.Contains(a, "=") {
				switch a {
				case "--arg-file", "--delimiter", "--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var":
					i++
				}
			}
		case len(a) > 1 && a[0] == '-':
			if c := rune(a[1]); strings.ContainsRune(withArg, c) && len(a) == 2 && c != 'e' && c != 'i' && c != 'l' {
				i++
			}
		default:
			return openCommand(args[i:])
		}
	}
	return openCommand([]string{"echo"})
}

func openCommand(argv []string) ([]string, bool, bool, bool) { return argv, false, true, true }

// priorityWrapper parses chrt and taskset: [options] value command;
// their -p forms change a running process and start nothing.
func priorityWrapper(args []string) ([]string, bool, bool, bool) {
	for i, a := range args {
		switch {
		case a == "-p" || a == "--pid":
			return nil, false, false, true
		case strings.HasPrefix(a, "-"):
		default:
			if i+1 < len(args) {
				return args[i+1:], false, false, true
			}
			return nil, false, false, true
		}
	}
	return nil, false, false, true
}

// flockWrapper parses flock [options] file command, and flock file -c
// script (a shell script).
func flockWrapper(args []string) ([]string, bool, bool, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-w" || a == "--timeout" || a == "-E" || a == "--conflict-exit-code":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			rest := args[i+1:]
			if len(rest) >= 2 && (rest[0] == "-c" || rest[0] == "--command") {
				return []string{"sh", "-c", rest[1]}, false, false, true
			}
			return rest, false, false, true
		}
	}
	return nil, false, false, true
}

// watchWrapper parses watch [options] command: watch runs its arguments,
// joined, through sh -c.
func watchWrapper(args []string) ([]string, bool, bool, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" || a == "--interval" || a == "-q" || a == "--equexit":
			i++
		case a == "-x" || a == "--exec":
			return args[i+1:], false, false, true
		case strings.HasPrefix(a, "-"):
		default:
			return []string{"sh", "-c", strings.Join(args[i:], " ")}, false, false, true
		}
	}
	return nil, false, false, true
}
