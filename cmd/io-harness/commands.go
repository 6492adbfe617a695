package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/initorigin/io-harness-go/internal/abi"
	"github.com/initorigin/io-harness-go/internal/visible"
	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

const traceUsage = `Usage: io-harness trace [--store PATH] [--json | --html FILE] RUN_ID

Shows a run's trace as the store holds it: each committed step with the
model's words, its tool calls and what came of them, retries, fallbacks and
refusals, then the outcome. --json prints the whole trace (run, steps,
events) as JSON. --html FILE writes the run, and every run below it, as one
self-contained page to look at in a browser (docs/trace.md): a timeline per
agent, tokens and cost over time, verdicts and approvals, the gate's output
per step and the diff of every write. It needs no network.`

func (e *env) traceCmd(args []string) int {
	fs := e.flags("trace", traceUsage)
	store := fs.String("store", defaultStore, storeHelp)
	asJSON := fs.Bool("json", false, "print the whole trace as JSON")
	htmlFile := fs.String("html", "", "write the trace as a self-contained HTML page to `FILE` (- for stdout)")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, "want exactly one RUN_ID, got %d arguments", len(pos))
	}
	if *asJSON && *htmlFile != "" {
		return usageError(fs, "give at most one of --json and --html")
	}
	h, code := e.openStore(*store)
	if h == 0 {
		return code
	}
	defer e.a.Close(h, 5*time.Second)
	format := "text"
	switch {
	case *asJSON:
		format = "json"
	case *htmlFile != "":
		format = "html"
	}
	var res struct {
		Text   string          `json:"text"`
		Trace  json.RawMessage `json:"trace"`
		HTML   string          `json:"html"`
		Agents int             `json:"agents"`
	}
	if err := e.call("trace.get", map[string]any{"harness": h, "run_id": pos[0], "format": format}, &res); err != nil {
		return e.fail("trace "+pos[0], err)
	}
	if *asJSON {
		var v any
		json.Unmarshal(res.Trace, &v)
		e.printJSON(v)
		return exitOK
	}
	if format == "html" {
		if *htmlFile == "-" {
			fmt.Fprint(e.stdout, res.HTML)
			return exitOK
		}
		if err := os.WriteFile(*htmlFile, []byte(res.HTML), 0o644); err != nil {
			return e.fail("write "+*htmlFile, err)
		}
		fmt.Fprintf(e.stderr, "wrote %s: run %s", *htmlFile, pos[0])
		if res.Agents > 1 {
			fmt.Fprintf(e.stderr, " and %d runs below it", res.Agents-1)
		}
		fmt.Fprintf(e.stderr, ", %s bytes\n", thousands(int64(len(res.HTML))))
		return exitOK
	}
	fmt.Fprint(e.stdout, visible.Text(res.Text))
	return exitOK
}

// openStore opens a harness over an existing store, for reading: a
// missing file is an error rather than a new empty store, and nothing is
// written to the store.
func (e *env) openStore(path string) (uint64, int) {
	if !postgres.IsDSN(path) {
		if _, err := os.Stat(path); err != nil {
			return 0, e.fail("open the store", fmt.Errorf("%w (choose the store with --store PATH)", err))
		}
	}
	var opened struct {
		Harness uint64 `json:"harness"`
	}
	if err := e.call("harness.open", map[string]any{"store": path, "read_only": true}, &opened); err != nil {
		return 0, e.fail("open the store "+harness.StoreName(path), err)
	}
	return opened.Harness, exitOK
}

const runsUsage = `Usage: io-harness runs [--store PATH] [--limit N] [--all] [--json]

Lists the runs of the store, newest first: id, status, outcome, steps,
tokens and when it started. A run that drives a tree of agents is one
line, with its agents counted by where they stand and its tokens the
whole tree's; --all lists every agent too, each with its parent. On a fleet's database
(--store postgres://...) the status is where the run stands in the fleet —
queued, running (with the worker that drives it), paused, finished, or
stalled (its worker is gone and no worker has swept it up yet) — and --json
adds each run's latest queue action.`

func (e *env) runsCmd(args []string) int {
	fs := e.flags("runs", runsUsage)
	store := fs.String("store", defaultStore, storeHelp)
	limit := fs.Int("limit", 20, "at most this many runs")
	all := fs.Bool("all", false, "list the agents of trees too")
	asJSON := fs.Bool("json", false, "print the runs as JSON")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return usageError(fs, "runs takes no arguments")
	}
	h, code := e.openStore(*store)
	if h == 0 {
		return code
	}
	defer e.a.Close(h, 5*time.Second)
	type run struct {
		ID          string          `json:"id"`
		ParentID    string          `json:"parent_id"`
		AgentPath   string          `json:"agent_path"`
		Status      string          `json:"status"`
		Outcome     string          `json:"outcome"`
		Steps       int             `json:"steps"`
		Usage       usage           `json:"usage"`
		LostUsage   usage           `json:"lost_usage"`
		StartedAt   time.Time       `json:"started_at"`
		Containment json.RawMessage `json:"containment"`
		// State and Worker are a fleet run's (docs/fleet.md).
		State  string `json:"state"`
		Worker string `json:"worker"`
	}
	var res struct {
		Runs  []run `json:"runs"`
		Fleet bool  `json:"fleet"`
	}
	var raw json.RawMessage
	if err := e.call("runs.list", map[string]any{"harness": h, "limit": *limit, "roots": !*all}, &raw); err != nil {
		return e.fail("list runs", err)
	}
	if *asJSON {
		var v any
		json.Unmarshal(raw, &v)
		e.printJSON(v)
		return exitOK
	}
	json.Unmarshal(raw, &res)
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	if res.Fleet {
		// A fleet's runs: where each stands, and which worker drives it.
		fmt.Fprintln(w, "RUN\tSTATE\tWORKER\tOUTCOME\tSTEPS\tTOKENS\tSTARTED")
		for _, r := range res.Runs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.State, orDash(r.Worker), orDash(r.Outcome), r.Steps,
				thousands(r.Usage.In+r.Usage.Out), r.StartedAt.Local().Format("2006-01-02 15:04:05"))
		}
		w.Flush()
		return exitOK
	}
	if *all {
		fmt.Fprintln(w, "RUN\tPARENT\tPATH\tSTATUS\tOUTCOME\tSTEPS\tTOKENS\tSTARTED")
	} else {
		fmt.Fprintln(w, "RUN\tSTATUS\tOUTCOME\tSTEPS\tTOKENS\tAGENTS\tSTARTED")
	}
	for _, r := range res.Runs {
		tokens := r.Usage.In + r.Usage.Out
		started := r.StartedAt.Local().Format("2006-01-02 15:04:05")
		if *all {
			parent := r.ParentID
			if parent == "" {
				parent = "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, parent, r.AgentPath, r.Status, r.Outcome, r.Steps, thousands(tokens), started)
			continue
		}
		agents := "-"
		if len(r.Containment) > 0 {
			var tree struct {
				Runs []run `json:"runs"`
			}
			if err := e.call("runs.list", map[string]any{"harness": h, "root_id": r.ID}, &tree); err != nil {
				return e.fail("list the agents of "+r.ID, err)
			}
			count := map[string]int{}
			tokens = 0
			for _, a := range tree.Runs {
				tokens += a.Usage.In + a.Usage.Out + a.LostUsage.In + a.LostUsage.Out
				if a.ID != r.ID {
					count[a.Status]++
				}
			}
			var parts []string
			for _, s := range []string{"running", "queued", "paused", "finished"} {
				if count[s] > 0 {
					parts = append(parts, fmt.Sprintf("%d %s", count[s], s))
				}
			}
			agents = strings.Join(parts, ", ")
			if agents == "" {
				agents = "0"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Status, r.Outcome, r.Steps, thousands(tokens), agents, started)
	}
	w.Flush()
	return exitOK
}

const storeUsage = `Usage: io-harness store check [--json] FILE

Checks a store file, reading only: SQLite's integrity check over the
whole file, the schema version, the store's three files (FILE, FILE-wal and
FILE-shm, which a copy must take together) and how many runs are running,
paused and finished, and how many a process drives now. Exits 1 when the
check finds damage.`

func (e *env) storeCmd(args []string) int {
	if len(args) == 0 || args[0] != "check" {
		fs := e.flags("store", storeUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprint(e.stdout, storeUsage+"\n")
			return exitOK
		}
		return usageError(fs, "want: store check FILE")
	}
	fs := e.flags("store check", storeUsage)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pos, _, code, ok := e.parse(fs, args[1:])
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, "want exactly one FILE, got %d arguments", len(pos))
	}
	var res struct {
		Report json.RawMessage `json:"report"`
		OK     bool            `json:"ok"`
		Text   string          `json:"text"`
	}
	if err := e.call("store.check", map[string]any{"store": pos[0]}, &res); err != nil {
		return e.fail("check the store "+pos[0], err)
	}
	if *asJSON {
		var v any
		json.Unmarshal(res.Report, &v)
		e.printJSON(v)
	} else {
		fmt.Fprint(e.stdout, res.Text)
	}
	if !res.OK {
		return exitError
	}
	return exitOK
}

const policyUsage = `Usage: io-harness policy explain [--json] POLICY ACT TARGET

Explains the verdict of a policy on one act: POLICY is a policy JSON file,
or "default" or "permissive" for the built-in policies; ACT is read, write,
exec or net; TARGET is a workspace path, a program, or host[:port]. Prints
the effect (allow, ask or deny) and the rule and layer that decided.`

func (e *env) policyCmd(args []string) int {
	fs := e.flags("policy explain", policyUsage)
	asJSON := fs.Bool("json", false, "print the verdict as JSON")
	if len(args) == 0 || (args[0] != "explain" && !strings.HasPrefix(args[0], "-")) {
		return usageError(fs, "want the subcommand explain")
	}
	if args[0] == "explain" {
		args = args[1:]
	}
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 3 {
		return usageError(fs, "want POLICY ACT TARGET, got %d arguments", len(pos))
	}
	var pol any = pos[0]
	if pos[0] != "default" && pos[0] != "permissive" {
		data, err := os.ReadFile(pos[0])
		if err != nil {
			return e.fail("read the policy", err)
		}
		pol = json.RawMessage(data)
	}
	var v struct {
		Act    string `json:"act"`
		Target string `json:"target"`
		Effect string `json:"effect"`
		Rule   string `json:"rule,omitempty"`
		Layer  string `json:"layer,omitempty"`
	}
	if err := e.call("policy.explain", map[string]any{"policy": pol, "act": pos[1], "target": pos[2]}, &v); err != nil {
		return e.fail("explain", err)
	}
	if *asJSON {
		e.printJSON(v)
		return exitOK
	}
	if v.Rule == "" {
		fmt.Fprintf(e.stdout, "%s: %s %s, by the %s default\n", v.Effect, v.Act, v.Target, v.Act)
	} else {
		fmt.Fprintf(e.stdout, "%s: %s %s, by rule %q in layer %q\n", v.Effect, v.Act, v.Target, v.Rule, v.Layer)
	}
	return exitOK
}

const sandboxUsage = `Usage:
  io-harness sandbox exec [--backend B] [--cpu S] [--wall S] [--memory N] [--disk N] [--net deny|HOST,...] [--workdir DIR [--lend]] -- ARGV...
  io-harness sandbox backends [--json]

exec runs one command in a sandbox and prints the JSON sandbox result
(exit code or signal, stdout and stderr base64-encoded, the cap hit, the
backend and what it enforced). The exit code is 0 when the sandbox ran the
command, whatever the command's own status; 1 when the sandbox failed.
A WebAssembly module (WASI preview 1) runs in the wasi backend: give
--backend wasi, or name a program ending in .wasm and no backend.

backends probes every backend of this OS and says what each enforces.`

func (e *env) sandboxCmd(args []string) int {
	if len(args) == 0 {
		fs := e.flags("sandbox", sandboxUsage)
		return usageError(fs, "want exec or backends")
	}
	switch args[0] {
	case "exec":
		return e.sandboxExec(args[1:])
	case "backends":
		return e.sandboxBackends(args[1:])
	case "-h", "-help", "--help":
		fmt.Fprintln(e.stdout, sandboxUsage)
		fmt.Fprint(e.stdout, "\n"+exitTable)
		return exitOK
	}
	return usageError(e.flags("sandbox", sandboxUsage), "unknown subcommand %q", args[0])
}

func (e *env) sandboxExec(args []string) int {
	fs := e.flags("sandbox exec", sandboxUsage)
	backend := fs.String("backend", "", "the backend (see sandbox backends); default: the strongest that works here, or wasi for a .wasm program")
	cpu := fs.Float64("cpu", 0, "the CPU-time cap in seconds (default 60)")
	wall := fs.Float64("wall", 0, "the wall-clock cap in seconds (default 120)")
	memory := fs.Int64("memory", 0, "the memory cap in bytes (default 2 GiB)")
	disk := fs.Int64("disk", 0, "the disk cap in bytes: what the command may store in files (default 1 GiB)")
	netFlag := fs.String("net", "deny", "deny, or a comma-separated allow-list of hosts (host or host:port)")
	workdir := fs.String("workdir", "", "a host directory bound writable as the working directory; default a fresh one")
	lend := fs.Bool("lend", false, "run as root, give the workdir to the unprivileged user the command runs as (it is not given back)")
	helper := fs.String("helper", "", "the io-harness-sandbox-exec helper executable")
	pos, argv, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		argv = append(pos, argv...)
	}
	if len(argv) == 0 {
		return usageError(fs, "give the command after --")
	}
	limits := map[string]any{}
	if *cpu > 0 {
		limits["cpu"] = seconds(*cpu)
	}
	if *wall > 0 {
		limits["wall"] = seconds(*wall)
	}
	if *memory > 0 {
		limits["memory"] = *memory
	}
	if *disk > 0 {
		limits["disk"] = *disk
	}
	spec := map[string]any{"argv": argv, "env": []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}
	if len(limits) > 0 {
		spec["limits"] = limits
	}
	if *workdir != "" {
		spec["workdir"] = *workdir
	}
	if *lend {
		spec["lend"] = true
	}
	switch *netFlag {
	case "deny", "":
	default:
		spec["network"] = map[string]any{"allow": strings.Split(*netFlag, ",")}
	}
	p := map[string]any{"spec": spec}
	if *backend != "" {
		p["backend"] = *backend
	}
	if *helper != "" {
		p["helper_path"] = *helper
	}
	var res json.RawMessage
	if err := e.call("sandbox.exec", p, &res); err != nil {
		// A command that ran keeps its result, beside the error.
		var ae *abi.Error
		if errors.As(err, &ae) && ae.Details["result"] != nil {
			e.printJSON(ae.Details["result"])
			delete(ae.Details, "result")
		}
		return e.fail("sandbox exec", err)
	}
	var v any
	json.Unmarshal(res, &v)
	e.printJSON(v)
	return exitOK
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).String()
}

func (e *env) sandboxBackends(args []string) int {
	fs := e.flags("sandbox backends", sandboxUsage)
	asJSON := fs.Bool("json", false, "print the backends as JSON")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return usageError(fs, "sandbox backends takes no arguments")
	}
	var res struct {
		OS       string            `json:"os"`
		Default  string            `json:"default"`
		Backends []abi.BackendInfo `json:"backends"`
	}
	if err := e.call("sandbox.backends", nil, &res); err != nil {
		return e.fail("sandbox backends", err)
	}
	if *asJSON {
		e.printJSON(res)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "sandbox backends on %s (default: %s)\n", res.OS, orNone(res.Default))
	for _, b := range res.Backends {
		if !b.Available {
			fmt.Fprintf(e.stdout, "  %-15s unavailable: %s\n", b.Name, oneLine(b.Reason, 120))
			continue
		}
		en := b.Enforcement
		var has []string
		for _, f := range []struct {
			name string
			on   bool
		}{{"filesystem", en.Filesystem}, {"private-tmp", en.PrivateTmp}, {"pid-namespace", en.PIDNamespace},
			{"host-processes", en.HostProcesses}, {"memory", en.Memory}, {"processes", en.Processes}, {"cpu", en.CPU},
			{"teardown", en.Teardown}, {"host-death", en.HostDeath}, {"seccomp", en.Seccomp}, {"no-new-privs", en.NoNewPrivs}} {
			if f.on {
				has = append(has, f.name)
			}
		}
		if en.Landlock > 0 {
			has = append(has, "landlock-v"+strconv.Itoa(en.Landlock))
		}
		fmt.Fprintf(e.stdout, "  %-15s network %s; enforces %s\n", b.Name, en.Network, strings.Join(has, ", "))
		if en.Gaps != "" {
			fmt.Fprintf(e.stdout, "  %-15s gaps: %s\n", "", oneLine(en.Gaps, 160))
		}
	}
	return exitOK
}

func orNone(s string) string {
	if s == "" {
		return "none works here"
	}
	return s
}

const versionUsage = `Usage: io-harness version [--json]

Prints the version of io-harness and of its ABI.`

func (e *env) versionCmd(args []string) int {
	fs := e.flags("version", versionUsage)
	asJSON := fs.Bool("json", false, "print everything the version method says, as JSON")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return usageError(fs, "version takes no arguments")
	}
	var v abi.VersionInfo
	if err := e.call("version", nil, &v); err != nil {
		return e.fail("version", err)
	}
	if *asJSON {
		e.printJSON(v)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "io-harness %s (ABI %d.%d, task contract v%d, store schema v%d, %s %s/%s)\n",
		v.Version, v.ABI.Major, v.ABI.Minor, v.ContractVersion, v.StoreSchema, v.Go, v.OS, v.Arch)
	return exitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
