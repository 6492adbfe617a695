// Command io-harness is the command-line front door of io-harness: it runs
// a JSON run spec with live progress, resumes runs, shows traces, answers
// deferred approvals, explains policy verdicts and runs commands in a
// sandbox. Every command goes through the same JSON method table as the C
// ABI (internal/abi).
//
//	io-harness run spec.json
//	io-harness trace RUN_ID
//	io-harness approve --spec spec.json RUN_ID REQUEST_ID --allow
//
// Run `io-harness help` for the commands and the exit codes; docs/cli.md
// has the same text.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/initorigin/io-harness-go/internal/abi"
	"github.com/initorigin/io-harness-go/internal/tty"
	"github.com/initorigin/io-harness-go/internal/visible"
)

// Exit codes. They tell a script how a command ended without parsing its
// output.
const (
	exitOK          = 0   // success: the run succeeded, or the command did its job
	exitError       = 1   // error: the command failed or the run could not be driven
	exitUsage       = 2   // usage: bad flags or arguments
	exitBudget      = 3   // budget: step_cap_reached, time_budget_exceeded, cost_budget_exceeded
	exitBoundary    = 4   // boundary: the policy refused (permission_denied)
	exitAwaiting    = 5   // awaiting_approval: a person must decide (io-harness approve)
	exitEscalated   = 6   // escalated: the provider failed past retries and fallbacks
	exitConflict    = 7   // conflict: another process drives the run (resume --force takes it)
	exitUnsatisfied = 8   // schema_unsatisfied: the final answer never matched the output schema
	exitCancelled   = 130 // cancelled: Ctrl-C or a cancel
)

const exitTable = `Exit codes:
  0    success: the run succeeded, or the command did its job
  1    error: the command failed, or the run could not be driven
  2    usage: bad flags or arguments
  3    budget: the run ended on a budget (step_cap_reached,
       verification_failed, time_budget_exceeded, cost_budget_exceeded,
       budget_ceiling_reached); resume it with a larger one
  4    boundary: the policy refused (permission_denied)
  5    awaiting_approval: the run waits for a person; answer with
       io-harness approve
  6    escalated: the provider failed past its retries and fallbacks
  7    conflict: another process drives the run; wait for it, or take it
       over with resume --force if it is dead
  8    schema_unsatisfied: the model's final answer never matched the
       task's output schema
  130  cancelled: interrupted (Ctrl-C) or cancelled
`

const mainUsage = `io-harness drives an AI agent through a JSON run spec to a verified result.

Usage:
  io-harness COMMAND [flags] [arguments]

Commands:
  run SPEC.json                    run a spec (- reads it from stdin), with live progress (--json: JSON lines)
  resume SPEC.json RUN_ID          continue a stored run (larger budgets, --reopen)
  approve RUN_ID REQUEST_ID --allow | --deny REASON
                                   answer the approval a stored run awaits and continue it
  watch RUN_ID                     follow a run another process drives; answer what it waits for
  trace RUN_ID                     show a run's trace (--json for the whole trace, --html FILE for a page)
  ui                               serve every run of the store as pages on a loopback port, live
  runs                             list the store's runs (a fleet's: queued, running with the worker, ...)
  submit SPEC.json --store URL     enqueue a run for a fleet's workers; prints its id at once
  worker --store URL               work a fleet's queue (--concurrency N, --health ADDR)
  fetch RUN_ID DIR --store URL     fetch the workspace an uploaded fleet run left
  store check FILE                 check a store's integrity and summarise its runs
  policy explain POLICY ACT TARGET explain a policy's verdict on an act and target
  sandbox exec [flags] -- ARGV...  run a command in a sandbox; prints the JSON result
  sandbox backends                 list the sandbox backends and what each enforces
  models                           list the model catalogue: windows, output caps, prices
  mcp tools SPEC.json              list the spec's MCP servers' tools with the policy's verdicts
  mcp serve SPEC.json              lend the workspace tools to another agent as an MCP server
  version                          print the version
  help [COMMAND]                   print this help, or a command's (as COMMAND --help)

Every command takes --help (printed on stdout). Runs are recorded in a SQLite store: --store
PATH, default ./io-harness.db in the working directory; or in a fleet's
PostgreSQL database: --store postgres://USER@HOST/DB (put the password in
PGPASSWORD or ~/.pgpass rather than in the URL, which other users of the
machine can see in the process list). Provider keys and
models come from the environment (OPENAI_API_KEY, ANTHROPIC_MODEL, ...)
when the spec leaves them empty, and a model catalogue override from
IO_HARNESS_MODELS when the spec names none.

` + exitTable

func main() {
	os.Exit(Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv))
}

// env is what a command runs with: its streams and the table.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	a      *abi.ABI
	// tty reports whether stdout is a terminal (live progress).
	tty bool
	// stdinTTY reports whether stdin is a terminal (approvals can be asked).
	stdinTTY bool
	// usages are the usage texts of the flag sets made, for --help.
	usages map[*flag.FlagSet]string
	// lookup reads the environment, for a worker's provider keys.
	lookup func(string) (string, bool)
}

// Main runs one command and returns its exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr,
		a: abi.New(&abi.Options{LookupEnv: lookup}), tty: isTerminal(stdout), stdinTTY: isTerminal(stdin), lookup: lookup,
		usages: map[*flag.FlagSet]string{}}
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		if cmd == "help" && len(rest) > 0 && rest[0] != "help" && !strings.HasPrefix(rest[0], "-") {
			// help COMMAND [SUB] is COMMAND [SUB] --help.
			return Main(ctx, append(append([]string{}, rest...), "--help"), stdin, stdout, stderr, lookup)
		}
		fmt.Fprint(stdout, mainUsage)
		return exitOK
	case "run":
		return e.runCmd(rest)
	case "resume":
		return e.resumeCmd(rest)
	case "approve":
		return e.approveCmd(rest)
	case "trace":
		return e.traceCmd(rest)
	case "watch":
		return e.watchCmd(rest)
	case "ui":
		return e.uiCmd(rest)
	case "runs":
		return e.runsCmd(rest)
	case "submit":
		return e.submitCmd(rest)
	case "worker":
		return e.workerCmd(rest)
	case "fetch":
		return e.fetchCmd(rest)
	case "store":
		return e.storeCmd(rest)
	case "policy":
		return e.policyCmd(rest)
	case "sandbox":
		return e.sandboxCmd(rest)
	case "models", "prices":
		return e.modelsCmd(rest)
	case "mcp":
		return e.mcpCmd(rest)
	case "version":
		return e.versionCmd(rest)
	}
	fmt.Fprintf(stderr, "io-harness: unknown command %q\n\n%s", cmd, mainUsage)
	return exitUsage
}

// isTerminal reports whether v is an *os.File open on a terminal. A
// character device is not enough: /dev/null is one, and a run under cron,
// systemd or ssh -n must not ask questions nobody can answer.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && f != nil && tty.IsTerminal(f.Fd())
}

// flags returns a flag set whose usage lists the flags as --name and the
// exit codes. --help prints it on stdout (it is what was asked for); a
// usage error prints it on stderr.
func (e *env) flags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { printUsage(fs.Output(), fs, usage) }
	e.usages[fs] = usage
	return fs
}

// printUsage writes a command's usage, its flags and the exit codes.
func printUsage(w io.Writer, fs *flag.FlagSet, usage string) {
	fmt.Fprintf(w, "%s\n", strings.TrimSpace(usage))
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(&b, " %s", name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(help, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(&b, " (default %q)", f.DefValue)
		}
		b.WriteByte('\n')
	})
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", b.String())
	}
	fmt.Fprintf(w, "\n%s", exitTable)
}

// parse parses flags that may come before, between or after the
// positional arguments, and returns the positionals. Arguments after "--"
// are returned separately, unparsed.
func (e *env) parse(fs *flag.FlagSet, args []string) (pos, after []string, code int, ok bool) {
	for i, a := range args {
		if a == "--" {
			args, after = args[:i], append([]string{}, args[i+1:]...)
			break
		}
	}
	// --help is answered on stdout: flag's own handling would print the
	// usage on the error stream.
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(e.stdout, fs, e.usages[fs])
				return nil, nil, exitOK, false
			}
			usage()
			return nil, nil, exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, after, 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageError prints a usage problem and the command's usage.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "io-harness %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitUsage
}

// call runs one method of the table and decodes its result into out.
func (e *env) call(method string, params any, out any) error {
	req, err := json.Marshal(map[string]any{"method": method, "params": params})
	if err != nil {
		return err
	}
	var env struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
		Error  *abi.Error      `json:"error"`
	}
	if err := json.Unmarshal(e.a.Call(e.ctx, req), &env); err != nil {
		return err
	}
	if !env.OK {
		return env.Error
	}
	if out != nil {
		return json.Unmarshal(env.Result, out)
	}
	return nil
}

// fail prints an error and returns its exit code.
func (e *env) fail(what string, err error) int {
	fmt.Fprintln(e.stderr, visible.Text(fmt.Sprintf("io-harness: %s: %v", what, err)))
	var ae *abi.Error
	if errors.As(err, &ae) {
		if f, ok := ae.Details["field"]; ok {
			fmt.Fprintf(e.stderr, "  field: %v\n", f)
		}
		if ae.Code == abi.CodePermissionDenied {
			return exitBoundary
		}
		if ae.Code == abi.CodeCancelled {
			return exitCancelled
		}
		if ae.Code == abi.CodeConflict && ae.Details["kind"] == "conflict" {
			return exitConflict // another driver holds the run
		}
	}
	return exitError
}

// printJSON writes v as indented JSON.
func (e *env) printJSON(v any) {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintln(e.stderr, "io-harness: encode:", err)
		return
	}
	fmt.Fprintln(e.stdout, string(out))
}
