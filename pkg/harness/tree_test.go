package harness_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// treeScript is a scripted model whose root plays root and whose other
// agents play the agents' scripts.
func treeScript(t testing.TB, root []scripted.Turn, agents ...scripted.AgentScript) *scripted.Provider {
	t.Helper()
	p, err := scripted.New(scripted.Script{Turns: root, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func text(s string) scripted.Turn { return scripted.Turn{Text: s} }

// spawns is a turn that spawns n children, each told its number, in the
// background or waited for.
func spawns(n int, wait bool) scripted.Turn {
	var cs []scripted.Call
	for i := range n {
		cs = append(cs, call("spawn_agent", map[string]any{"goal": fmt.Sprintf("write your file, part %d", i), "wait": wait}))
	}
	return scripted.Turn{ToolCalls: cs}
}

// gauge is a provider that counts the calls in flight of agents other
// than the root, and the most at once.
type gauge struct {
	provider.Provider
	mu         sync.Mutex
	now, peak  int
	byAgent    map[string]int
	hold       time.Duration
	firstBatch chan struct{} // closed when peakWant calls were in flight at once
	peakWant   int
}

func (g *gauge) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	child := req.Agent != "" && req.Agent != "root"
	if child {
		g.mu.Lock()
		g.now++
		g.peak = max(g.peak, g.now)
		if g.byAgent == nil {
			g.byAgent = map[string]int{}
		}
		g.byAgent[req.Agent]++
		if g.firstBatch != nil && g.now >= g.peakWant {
			select {
			case <-g.firstBatch:
			default:
				close(g.firstBatch)
			}
		}
		batch := g.firstBatch
		g.mu.Unlock()
		if batch != nil {
			// The first calls wait for the cap to fill, so that the test
			// sees the cap reached, whatever the machine's speed.
			select {
			case <-batch:
			case <-time.After(time.Minute):
			}
		}
		defer func() {
			g.mu.Lock()
			g.now--
			g.mu.Unlock()
		}()
	}
	return g.Provider.Complete(ctx, req, onText)
}

func (g *gauge) Price(u provider.Usage) provider.Cost {
	if p, ok := g.Provider.(provider.Pricer); ok {
		return p.Price(u)
	}
	return provider.Cost{Known: true}
}

// childWrites is the script of a child that writes a file named after
// itself and answers.
var childWrites = scripted.AgentScript{Path: "root/*", Turns: []scripted.Turn{
	calls(call("write_file", map[string]any{"path": "out/{agent}.txt", "content": "by {agent}\n"})),
	text("done: {agent}"),
}}

// A fan-out of 120 children under a concurrency cap of 16 completes, and
// no more than 16 agents ever call the model at once. The root waits for
// them with collect_agents, giving its slot back meanwhile.
func TestTreeFanOut(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	g := &gauge{Provider: treeScript(t, []scripted.Turn{spawns(120, false), calls(call("collect_agents", map[string]any{})), text("all done")}, childWrites),
		firstBatch: make(chan struct{}), peakWant: 16}
	var ev events
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "split the work", Root: dir},
		harness.Options{Provider: g, Store: st, Observer: ev.observe,
			Containment: &harness.Containment{MaxAgents: 121, MaxConcurrent: 16}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Finished {
		t.Fatalf("root outcome %+v", res.Outcome)
	}
	if g.peak > 16 {
		t.Errorf("%d agents called the model at once; the cap is 16", g.peak)
	}
	if g.peak < 16 {
		t.Errorf("at most %d agents called the model at once; the cap of 16 was never reached", g.peak)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "out"))
	if err != nil || len(entries) != 120 {
		t.Fatalf("%d files written (%v), want 120", len(entries), err)
	}
	runs, err := st.Runs(context.Background(), store.RunFilter{RootID: res.RunID, Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 121 {
		t.Fatalf("%d runs in the tree, want 121", len(runs))
	}
	for _, r := range runs[1:] {
		if r.ParentID != res.RunID || r.Status != store.StatusFinished || r.Outcome != string(harness.Finished) || r.Steps != 2 {
			t.Errorf("agent %s: parent %s status %s outcome %s steps %d", r.AgentPath, r.ParentID, r.Status, r.Outcome, r.Steps)
		}
	}
	if n := len(ev.of(harness.EventAgentSpawned)); n != 120 {
		t.Errorf("%d agent_spawned events", n)
	}
	if n := len(ev.of(harness.EventAgentFinished)); n != 120 {
		t.Errorf("%d agent_finished events", n)
	}
	// Every event names its agent.
	paths := map[string]bool{}
	for _, e := range ev.of(harness.EventCheckpoint) {
		paths[e.Path] = true
	}
	if len(paths) != 121 {
		t.Errorf("checkpoints came from %d agent paths, want 121", len(paths))
	}
}

// A spawn past the agent count or the depth is refused as an observation
// naming the cap, which the model can adapt to; the run goes on.
func TestTreeRefusals(t *testing.T) {
	dir := workspace(t, nil)
	var ev events
	child := scripted.AgentScript{Path: "root/*", Turns: []scripted.Turn{
		calls(call("spawn_agent", map[string]any{"goal": "grandchild"})),
		text("child done"),
	}}
	root := []scripted.Turn{
		spawns(3, true), // the third is past max_agents 3 (root + 2)
		text("root done"),
	}
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: dir},
		harness.Options{Provider: treeScript(t, root, child), Store: memStore(t), Observer: ev.observe,
			Containment: &harness.Containment{MaxAgents: 3, MaxDepth: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Finished {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	caps := map[string]int{}
	for _, e := range ev.of(harness.EventAgentRefused) {
		caps[e.Agent.Cap]++
		if !strings.Contains(e.Reason, "containment.") {
			t.Errorf("a refusal that does not name its cap: %q", e.Reason)
		}
	}
	if caps["max_agents"] != 1 || caps["max_depth"] != 2 {
		t.Errorf("refusals by cap: %v, want one max_agents and two max_depth", caps)
	}
	var refusedObs int
	for _, e := range ev.of(harness.EventToolResult) {
		if e.Tool == "spawn_agent" && strings.Contains(e.Output, "[refused]") {
			refusedObs++
		}
	}
	if refusedObs != 3 {
		t.Errorf("%d refusals reached the model as observations, want 3", refusedObs)
	}
}

// When the tree's token ceiling is reached the whole tree halts with
// budget_ceiling_reached: the agent that found it and every other agent
// still working, each recording why.
func TestTreeCeilingHaltsTheTree(t *testing.T) {
	dir := workspace(t, nil)
	st := memStore(t)
	usage := &provider.Usage{InputTokens: 900, OutputTokens: 100}
	loop := scripted.Turn{ToolCalls: []scripted.Call{call("list_dir", map[string]any{"path": "."})}, Usage: usage}
	var turns []scripted.Turn
	for range 30 {
		turns = append(turns, loop)
	}
	child := scripted.AgentScript{Path: "root/*", Turns: turns}
	root := []scripted.Turn{
		{ToolCalls: spawns(4, true).ToolCalls, Usage: &provider.Usage{InputTokens: 10, OutputTokens: 10}},
		text("root done"),
	}
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 40}},
		harness.Options{Provider: treeScript(t, root, child), Store: st,
			Containment: &harness.Containment{MaxAgents: 5, MaxConcurrent: 4, MaxTokens: 20_000}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.BudgetCeilingReached || res.Outcome.Budget != harness.BudgetTokens {
		t.Fatalf("root outcome %+v", res.Outcome)
	}
	runs, err := st.Runs(context.Background(), store.RunFilter{RootID: res.RunID, Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, r := range runs {
		total += r.Usage.Total() + r.LostUsage.Total()
		if r.Outcome != string(harness.BudgetCeilingReached) {
			t.Errorf("agent %s ended %s, not with the tree", r.AgentPath, r.Outcome)
		}
	}
	if total > 20_000 {
		t.Errorf("the tree spent %d tokens past its ceiling of 20000", total)
	}
	if total < 20_000-5*1000 {
		t.Errorf("the tree halted at %d tokens, far below its ceiling", total)
	}
}

// A child's boundary is its parent's, narrowed: the deny it was spawned
// with holds, and the parent's deny holds in the child too.
func TestTreeChildIsContained(t *testing.T) {
	dir := workspace(t, nil)
	child := scripted.AgentScript{Path: "root/*", Turns: []scripted.Turn{
		calls(call("write_file", map[string]any{"path": "secret/x.txt", "content": "x"}),
			call("write_file", map[string]any{"path": "notes/x.txt", "content": "x"}),
			call("write_file", map[string]any{"path": "ok.txt", "content": "x"})),
		text("child done"),
	}}
	root := []scripted.Turn{
		calls(call("spawn_agent", map[string]any{"goal": "write", "deny": map[string]any{"write": []string{"notes/**"}}})),
		text("root done"),
	}
	pol := policyOf(t, `{"version":1,"defaults":{"read":"allow","write":"allow","exec":"deny","net":"deny"},
		"layers":[{"name":"project","rules":[{"act":"write","effect":"deny","pattern":"secret/**"}]}]}`)
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: dir},
		harness.Options{Provider: treeScript(t, root, child), Store: memStore(t), Policy: pol,
			Containment: &harness.Containment{MaxAgents: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Finished {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	for _, p := range []string{"secret/x.txt", "notes/x.txt"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("the child wrote %s, which its boundary denies", p)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ok.txt")); err != nil {
		t.Errorf("the child could not write what its boundary allows: %v", err)
	}
}

// raceTurns is a child's script for the race on log.txt: rounds of
// reading the file and writing it back whole, each write a version of its
// own ("c:<agent>:<round>") that names nothing of what it read.
func raceTurns(rounds int) []scripted.Turn {
	var turns []scripted.Turn
	for k := range rounds {
		turns = append(turns,
			calls(call("read_file", map[string]any{"path": "log.txt"})),
			calls(call("write_file", map[string]any{"path": "log.txt", "content": fmt.Sprintf("c:{agent}:%d\n", k)})))
	}
	return append(turns, text("done"))
}

// writeChain reads the race out of one agent's tool results, in order:
// for each write, the version its agent last read and whether it landed.
type raceWrite struct {
	agent, base, version string
	landed, conflict     bool
}

var versionRE = regexp.MustCompile(`c:[^:\s]+:\d+|start`)

func raceWrites(evs []harness.Event) []raceWrite {
	lastRead := map[string]string{}
	var out []raceWrite
	for _, e := range evs {
		if e.Kind != harness.EventToolResult && e.Kind != harness.EventToolCall {
			continue
		}
		switch {
		case e.Kind == harness.EventToolResult && e.Tool == "read_file":
			lastRead[e.Path] = versionRE.FindString(e.Output)
		case e.Kind == harness.EventToolCall && e.Tool == "write_file":
			out = append(out, raceWrite{agent: e.Path, base: lastRead[e.Path], version: versionRE.FindString(string(e.Arguments))})
		case e.Kind == harness.EventToolResult && e.Tool == "write_file":
			for i := len(out) - 1; i >= 0; i-- {
				if out[i].agent == e.Path {
					out[i].landed = !e.IsError
					out[i].conflict = strings.HasPrefix(e.Output, "[conflict]")
					break
				}
			}
		}
	}
	return out
}

// lostUpdates returns the landed writes made over a version their writer
// never read: two landed writes on the same base mean the second lost the
// first. The landed versions must chain from "start".
func lostUpdates(writes []raceWrite) []string {
	var lost []string
	byBase := map[string]string{}
	for _, w := range writes {
		if !w.landed {
			continue
		}
		if prev, ok := byBase[w.base]; ok {
			lost = append(lost, fmt.Sprintf("%s wrote %s over %s, which %s had already replaced", w.agent, w.version, w.base, prev))
		}
		byBase[w.base] = w.version
	}
	return lost
}

// raceOnOneFile runs a tree whose n children race on log.txt: each reads
// the file and writes it back whole, rounds times. edit, when set,
// changes the tree's options. It returns the writes, in order.
func raceOnOneFile(t *testing.T, n, rounds int, edit func(*harness.Options)) []raceWrite {
	t.Helper()
	dir := workspace(t, map[string]string{"log.txt": "start\n"})
	var ev events
	child := scripted.AgentScript{Path: "root/*", Turns: raceTurns(rounds)}
	opts := harness.Options{Provider: treeScript(t, []scripted.Turn{spawns(n, false), calls(call("collect_agents", map[string]any{})), text("root done")}, child),
		Store: memStore(t), Observer: ev.observe, Containment: &harness.Containment{MaxAgents: n + 1, MaxConcurrent: n}}
	if edit != nil {
		edit(&opts)
	}
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: 2*rounds + 2}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Finished {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return raceWrites(ev.all)
}

// raceFaults judges a race of want writes: each must have landed or been
// refused as a conflict, some must have landed, and none may have landed
// over a version its writer never read.
func raceFaults(writes []raceWrite, want int) []string {
	landed, conflicts := 0, 0
	for _, w := range writes {
		if w.landed {
			landed++
		}
		if w.conflict {
			conflicts++
		}
	}
	if len(writes) != want || landed+conflicts != want || landed == 0 {
		return []string{fmt.Sprintf("%d writes, %d landed, %d conflicts; want %d writes, each landed or a conflict", len(writes), landed, conflicts, want)}
	}
	return lostUpdates(writes)
}

// Siblings racing on one file lose nothing silently: each reads the file
// and writes it back whole, again and again. A write over a version its
// writer did not read is refused as a conflict the model is told about;
// every write that lands was made on the version before it, so the
// landed versions form one chain. The negative control runs the same
// tree with the write guard switched off, the siblings' first writes
// held until two of them have read the file: a write lands over a
// version its writer never read, every time.
func TestTreeSiblingsRacingOnOneFile(t *testing.T) {
	const n, rounds = 8, 5
	writes := raceOnOneFile(t, n, rounds, nil)
	if faults := raceFaults(writes, n*rounds); len(faults) > 0 {
		t.Fatalf("the guarded race:\n%s", strings.Join(faults, "\n"))
	}
	conflicts := 0
	for _, w := range writes {
		if w.conflict {
			conflicts++
		}
	}
	t.Logf("%d writes landed, %d were conflicts the model was told about", len(writes)-conflicts, conflicts)

	// The control.
	met := &meeting{want: 2, all: make(chan struct{})}
	blind := raceOnOneFile(t, n, rounds, func(o *harness.Options) {
		harness.WrapFiles(o, func(v tool.Files) tool.Files { return &blindView{Files: v, met: met} })
	})
	faults := raceFaults(blind, n*rounds)
	if len(faults) == 0 {
		t.Fatal("the negative control: with the write guard off no update was lost: the test cannot see one")
	}
	t.Logf("without the guard:\n%s", strings.Join(faults, "\n"))
}

// blindView is an agent's view of a tree's workspace with the write guard
// switched off: each write is judged as if its agent had seen every
// write before it. The agent's first write waits at met first.
type blindView struct {
	tool.Files
	met   *meeting
	wrote atomic.Bool
}

func (v *blindView) Write(p string, _ uint64, write func() error) error {
	if !v.wrote.Swap(true) {
		v.met.arrive()
	}
	return v.Files.Write(p, math.MaxUint64, write)
}

// meeting holds those who arrive until want have; later ones pass.
type meeting struct {
	want    int64
	arrived atomic.Int64
	all     chan struct{}
}

func (m *meeting) arrive() {
	if m.arrived.Add(1) == m.want {
		close(m.all)
	}
	<-m.all
}

func policyOf(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// processesWith lists the host's processes whose command line holds mark.
func processesWith(t *testing.T, mark string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to look for processes in: %v", err)
	}
	var out []string
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(data), mark) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return out
}

// A tree's teardown leaves no process behind: children running commands
// that fork into the background are cut short when the caller cancels
// the tree, and once Run returns none of their processes is left. The
// negative control starts the same background command outside the
// sandbox, where the scan finds it.
func TestTreeTeardownLeavesNoProcess(t *testing.T) {
	if _, err := sandbox.New(context.Background(), nil); err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	const mark = "313.271828"
	ctrl := exec.Command("sh", "-c", "sleep "+mark+" & wait")
	if err := ctrl.Start(); err != nil {
		t.Fatal(err)
	}
	var found []string
	for range 200 {
		if found = processesWith(t, mark); len(found) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctrl.Process.Kill()
	ctrl.Wait()
	exec.Command("pkill", "-f", "sleep "+mark).Run()
	if len(found) == 0 {
		t.Fatal("negative control: the scan did not find a plain background command")
	}

	dir := workspace(t, nil)
	child := scripted.AgentScript{Path: "root/*", Turns: []scripted.Turn{
		calls(call("exec", map[string]any{"argv": []string{"sh", "-c", "sleep " + mark + " & sleep " + mark + "; echo done"}, "timeout_seconds": 600})),
		text("child done"),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 8)
	obs := func(e harness.Event) {
		if e.Kind == harness.EventSandbox && e.Sandbox.Kind == sandbox.EventExec && e.Path != "root" {
			started <- struct{}{}
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := harness.Run(ctx, harness.TaskContract{Goal: "g", Root: dir},
			harness.Options{Provider: treeScript(t, []scripted.Turn{spawns(3, true), text("root done")}, child), Store: memStore(t),
				Observer: obs, Containment: &harness.Containment{MaxAgents: 4, MaxConcurrent: 3}})
		done <- err
	}()
	for range 3 {
		select {
		case <-started:
		case <-time.After(2 * time.Minute):
			t.Fatal("the children's commands never started")
		}
	}
	// Let the background sleeps start, then cancel the tree.
	running := 0
	for range 500 {
		if running = len(processesWith(t, mark)); running >= 6 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if running == 0 {
		t.Fatal("no process of the children's commands was ever seen running")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if left := processesWith(t, mark); len(left) > 0 {
		t.Errorf("processes left behind by the tree:\n%s", strings.Join(left, "\n"))
	}
}

// The money ceiling halts the tree as the token ceiling does, and a tree
// whose providers cannot price their calls is refused a money ceiling
// before anything is spent.
func TestTreeMoneyCeiling(t *testing.T) {
	price := &provider.Price{Input: 10, Output: 10} // $10 per million tokens
	loop := scripted.Turn{ToolCalls: []scripted.Call{call("list_dir", map[string]any{"path": "."})}, Usage: &provider.Usage{InputTokens: 900, OutputTokens: 100}}
	var turns []scripted.Turn
	for range 30 {
		turns = append(turns, loop)
	}
	p, err := scripted.New(scripted.Script{Price: price,
		Turns:  []scripted.Turn{spawns(3, true), text("root done")},
		Agents: []scripted.AgentScript{{Path: "root/*", Turns: turns}}})
	if err != nil {
		t.Fatal(err)
	}
	st := memStore(t)
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: workspace(t, nil), Budgets: harness.Budgets{MaxSteps: 40}},
		harness.Options{Provider: p, Store: st, Containment: &harness.Containment{MaxAgents: 4, MaxConcurrent: 3, MaxCostUSD: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.BudgetCeilingReached || res.Outcome.Budget != harness.BudgetMoney {
		t.Fatalf("root outcome %+v", res.Outcome)
	}
	runs, _ := st.Runs(context.Background(), store.RunFilter{RootID: res.RunID, Limit: -1})
	var usd float64
	for _, r := range runs {
		usd += r.Cost.USD + r.LostCost.USD
	}
	if usd > 0.2+1e-9 {
		t.Errorf("the tree spent $%f past its ceiling of $0.2", usd)
	}

	// Unpriced: refused as a config error naming the field.
	_, err = harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: workspace(t, nil)},
		harness.Options{Provider: struct{ provider.Provider }{treeScript(t, []scripted.Turn{text("x")})}, Store: memStore(t),
			Containment: &harness.Containment{MaxAgents: 2, MaxCostUSD: 1}})
	var he *harness.Error
	if !errors.As(err, &he) || he.Kind != harness.ErrConfig || !strings.Contains(err.Error(), "containment.max_cost_usd") {
		t.Errorf("an unpriced money ceiling: %v", err)
	}
}
