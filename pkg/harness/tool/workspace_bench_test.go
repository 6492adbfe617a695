package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/snapshot"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// benchTree writes files files of 4 KiB under dir, 40 to a directory
// (500 directories at 20,000 files), and under node_modules the files
// of a dependency tree when deps is not zero.
func benchTree(b *testing.B, dir string, files, deps int) {
	b.Helper()
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte('a' + i%26)
	}
	write := func(prefix string, n int) {
		for i := range n {
			d := filepath.Join(dir, prefix, fmt.Sprintf("d%04d", i/40))
			if i%40 == 0 {
				if err := os.MkdirAll(d, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%02d.txt", i%40)), block, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	write("src", files)
	if deps > 0 {
		write("node_modules/dep", deps)
	}
}

// armTimes keeps each arm's times, for medians.
type armTimes map[string][]time.Duration

func (a armTimes) median(arm string) float64 {
	ts := append([]time.Duration(nil), a[arm]...)
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	if len(ts) == 0 {
		return 0
	}
	return float64(ts[len(ts)/2]) / float64(time.Millisecond)
}

// BenchmarkWorkspaceCommands measures what a command costs the agent on
// workspaces of growing size: an exec ["true"] call and a
// command_succeeds ["true"] gate, against the bare sandbox running the
// same command in the same tree (sandbox.Run with the tree as its workdir,
// as `io-harness sandbox exec --workdir` does), the three arms
// interleaved in one loop so that machine noise falls on all of them.
// It reports each arm's median in ms, the ratios to the bare sandbox, and
// (from the second size on) the ratio to the 100-file case. The copy/
// cases take the copy a backend without an overlay makes (the same
// sandbox, its overlay switched off), to 20,000 files, made anew every
// call; the shadow/ cases the run's copy, brought up to date (the second
// and later calls of a run).
func BenchmarkWorkspaceCommands(b *testing.B) {
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		b.Skipf("no sandbox: %v", err)
	}
	if !sb.Enforcement().Overlay {
		b.Fatalf("%s holds no changes apart here", sb.Name())
	}
	base := map[string]float64{}
	cases := []struct {
		name        string
		files, deps int
		way         string // overlay, copy (made anew each call), shadow (the run's copy)
	}{
		{"files=100", 100, 0, "overlay"},
		{"files=2000", 2000, 0, "overlay"},
		{"files=20000", 20000, 0, "overlay"},
		{"files=100000", 100000, 0, "overlay"},
		{"files=100+node_modules=5000", 100, 5000, "overlay"},
		{"copy/files=100", 100, 0, "copy"},
		{"copy/files=2000", 2000, 0, "copy"},
		{"copy/files=20000", 20000, 0, "copy"},
		{"shadow/files=100", 100, 0, "shadow"},
		{"shadow/files=2000", 2000, 0, "shadow"},
		{"shadow/files=20000", 20000, 0, "shadow"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			benchTree(b, dir, tc.files, tc.deps)
			if os.Geteuid() == 0 {
				// The bare sandbox's workdir must be the run user's to write,
				// as `sandbox exec --workdir` needs; the harness's arms lend
				// nothing.
				os.Chmod(dir, 0o777)
			}
			// A tree its user has had for more than a moment: the
			// listings of directories changed within the last second are
			// not remembered (snapshot.Names).
			time.Sleep(1100 * time.Millisecond)
			root, err := os.OpenRoot(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			run := sb
			if tc.way != "overlay" {
				run = noOverlay{sb}
			}
			names := &snapshot.Names{} // one per run, as the harness keeps it
			env := &Env{Root: root, Sandbox: run, Names: names}
			venv := &verify.Env{Root: root, Sandbox: run, Names: names}
			if tc.way == "shadow" {
				// The run's copies, as the harness keeps them: the warm
				// call below makes them, the timed ones bring them up to
				// date.
				env.Shadow, venv.Shadow = snapshot.NewShadow(), snapshot.NewShadow()
				defer env.Shadow.Close()
				defer venv.Shadow.Close()
			}
			gate := verify.Check{Kind: verify.CommandSucceeds, Argv: []string{"true"}}
			if err := gate.Validate(""); err != nil {
				b.Fatal(err)
			}
			args := json.RawMessage(`{"argv": ["true"]}`)
			times := armTimes{}
			arms := []struct {
				name string
				do   func() error
			}{
				{"bare", func() error {
					res, err := sb.Run(context.Background(), &sandbox.Spec{Argv: []string{"true"}, Workdir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("exit %d", res.ExitCode)
					}
					return err
				}},
				{"exec", func() error {
					if r := (execTool{}).Call(context.Background(), env, args); r.IsError {
						return fmt.Errorf("%s", r.Output)
					}
					return nil
				}},
				{"gate", func() error {
					r, err := verify.Run(context.Background(), venv, &gate)
					if err == nil && !r.Passed {
						err = fmt.Errorf("%s: %s", r.Detail, r.Output)
					}
					return err
				}},
			}
			for _, a := range arms { // warm: page cache, the sandbox's first start
				if err := a.do(); err != nil {
					b.Fatalf("%s: %v", a.name, err)
				}
			}
			b.ResetTimer()
			for range b.N {
				for _, a := range arms {
					start := time.Now()
					if err := a.do(); err != nil {
						b.Fatalf("%s: %v", a.name, err)
					}
					times[a.name] = append(times[a.name], time.Since(start))
				}
			}
			b.StopTimer()
			bare, ex, g := times.median("bare"), times.median("exec"), times.median("gate")
			b.ReportMetric(bare, "bare-ms")
			b.ReportMetric(ex, "exec-ms")
			b.ReportMetric(g, "gate-ms")
			b.ReportMetric(ex/bare, "exec/bare")
			b.ReportMetric(g/bare, "gate/bare")
			key := tc.way
			if tc.files == 100 && tc.deps == 0 {
				base[key+"exec"], base[key+"gate"] = ex, g
			} else if base[key+"exec"] > 0 {
				b.ReportMetric(ex/base[key+"exec"], "exec/exec@100")
				b.ReportMetric(g/base[key+"gate"], "gate/gate@100")
			}
		})
	}
}
