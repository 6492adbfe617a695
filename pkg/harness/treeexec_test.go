package harness_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// execRaceTurns is a child's script for the race on log.txt through exec:
// rounds of a command that reads the file and writes it back whole, its
// new version ("c:<agent>:<round>") followed by the version it read, and
// prints what it wrote.
func execRaceTurns(rounds int) []scripted.Turn {
	var turns []scripted.Turn
	for k := range rounds {
		turns = append(turns, calls(call("exec", map[string]any{"argv": []string{"sh", "-c",
			fmt.Sprintf(`read v < log.txt; printf 'c:{agent}:%d<-%%s\n' "$v" | tee log.txt`, k)}})))
	}
	return append(turns, text("done"))
}

var execWriteRE = regexp.MustCompile(`(c:[^:\s<]+:\d+)<-(c:[^:\s<]+:\d+|start)`)

// execRaceWrites reads the race out of the exec results, in order: each
// command's write (its version and the base it read), and whether its
// copy-back landed or was refused as a conflict.
func execRaceWrites(evs []harness.Event) []raceWrite {
	var out []raceWrite
	for _, e := range evs {
		if e.Kind != harness.EventToolResult || e.Tool != "exec" {
			continue
		}
		w := raceWrite{agent: e.Path}
		if m := execWriteRE.FindStringSubmatch(e.Output); m != nil {
			w.version, w.base = m[1], m[2]
		}
		w.landed = strings.Contains(e.Output, "changed in the workspace: log.txt")
		w.conflict = strings.Contains(e.Output, "[conflict]")
		out = append(out, w)
	}
	return out
}

// execRace runs a tree whose n children race on log.txt through exec,
// rounds times each, and returns the writes in order.
func execRace(t *testing.T, sb sandbox.Sandbox, n, rounds int, edit func(*harness.Options)) []raceWrite {
	t.Helper()
	dir := workspace(t, map[string]string{"log.txt": "start\n"})
	var ev events
	child := scripted.AgentScript{Path: "root/*", Turns: execRaceTurns(rounds)}
	opts := harness.Options{Provider: treeScript(t, []scripted.Turn{spawns(n, false), calls(call("collect_agents", map[string]any{})), text("root done")}, child),
		Store: memStore(t), Observer: ev.observe, Policy: execPolicy(), NativeSandbox: sb,
		Containment: &harness.Containment{MaxAgents: n + 1, MaxConcurrent: n}}
	if edit != nil {
		edit(&opts)
	}
	res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "g", Root: dir, Budgets: harness.Budgets{MaxSteps: rounds + 2}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Kind != harness.Finished {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return execRaceWrites(ev.all)
}

// Siblings whose commands race on one file through exec lose nothing
// silently. Each command runs in its own upper layer (or its own copy),
// reads log.txt and writes it back whole; the copy-back of a command
// whose file another agent wrote after the command started is refused as
// a conflict the model is told about, so every write that lands was made
// on the version before it and the landed versions form one chain. The
// negative control is the same tree with the write guard switched off
// (blindView), each sibling's first copy-back held until two commands
// have run: a write lands over a version its command never read.
func TestTreeSiblingsExecRacingOnOneFile(t *testing.T) {
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		t.Skipf("no sandbox backend works here: %v", err)
	}
	const n, rounds = 4, 4
	for _, c := range []struct {
		name string
		sb   sandbox.Sandbox
	}{{"overlay", sb}, {"copy", noOverlay{sb}}} {
		t.Run(c.name, func(t *testing.T) {
			writes := execRace(t, c.sb, n, rounds, nil)
			for _, w := range writes {
				if w.version == "" {
					t.Fatalf("a command of %s printed no write", w.agent)
				}
			}
			if faults := raceFaults(writes, n*rounds); len(faults) > 0 {
				t.Fatalf("the guarded race:\n%s", strings.Join(faults, "\n"))
			}

			met := &meeting{want: 2, all: make(chan struct{})}
			blind := execRace(t, c.sb, n, rounds, func(o *harness.Options) {
				harness.WrapFiles(o, func(v tool.Files) tool.Files { return &blindView{Files: v, met: met} })
			})
			faults := raceFaults(blind, n*rounds)
			if len(faults) == 0 {
				t.Fatal("the negative control: with the write guard off no update was lost: the test cannot see one")
			}
			t.Logf("without the guard:\n%s", strings.Join(faults, "\n"))
		})
	}
}
