package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/eino/schema"

	"github.com/initorigin/io-harness-go/pkg/harness/store/memory"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// arm is one way of playing the step task.
type arm interface {
	name() string
	// play runs p's script in p's workspace and returns the final answer.
	// The run's context carries p (withPlay).
	play(ctx context.Context, p *play) (string, error)
}

// onDisker is an arm whose workspace must be on the disk: one whose runs
// are durable, which a file system in memory would make free.
type onDisker interface{ onDisk() bool }

// places are where workspaces are made: fast, a file system in memory
// where one is found, and disk, beside the store file.
type places struct{ fast, disk string }

// newPlaces returns the places of tb's workspaces, removed when tb ends.
// A file's creation on this shared disk can take from 50 µs to a
// millisecond depending on what others are doing, which would drown the
// per-step cost of a framework; so the arms whose runs are not durable
// write their (real) files to /dev/shm when it is there.
func newPlaces(tb testing.TB) places {
	tb.Helper()
	p := places{fast: tb.TempDir(), disk: tb.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "io-harness-bench-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(d) })
			p.fast = d
			return p
		}
	}
	tb.Logf("no /dev/shm: every workspace is on the disk (%s), and file writes add its noise to each arm", p.fast)
	return p
}

// stepArms returns every arm for the script s: the two floors, io-harness
// in memory and on a store file in dir, eino and langchaingo. The stores
// are closed when tb ends.
func stepArms(tb testing.TB, s *script, dir string) []arm {
	tb.Helper()
	ctx := context.Background()
	// In memory, the harness's own default: the store of maps and slices.
	mem := memory.New()
	tb.Cleanup(func() { mem.Close() })
	disk, err := sqlite.Open(ctx, filepath.Join(dir, "steps.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { disk.Close() })
	hmem, err := newHarnessArm("harness-mem", s, mem, 0)
	if err != nil {
		tb.Fatal(err)
	}
	hdisk, err := newHarnessArm("harness-disk", s, disk, 0)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := newEinoArm(ctx, s.n, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return []arm{newDirectArm(hmem, false), newDirectArm(hmem, true), hmem, hdisk, e, newLangchaingoArm(s.n)}
}

// playOnce plays s with a in a fresh workspace in its place and checks
// the work: it returns the play and the time the arm took.
func playOnce(a arm, s *script, at places) (*play, time.Duration, error) {
	dir := at.fast
	if d, ok := a.(onDisker); ok && d.onDisk() {
		dir = at.disk
	}
	ws, err := os.MkdirTemp(dir, a.name()+"-")
	if err != nil {
		return nil, 0, err
	}
	p := newPlay(s, ws)
	ctx := withPlay(context.Background(), p)
	t0 := time.Now()
	answer, err := a.play(ctx, p)
	d := time.Since(t0)
	if err == nil {
		err = p.check(answer)
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", a.name(), err)
	}
	return p, d, err
}

// TestArms plays a short task with every arm and checks that each did the
// whole work: every turn asked for with the whole history, every file
// written, the answer returned. The negative controls show each check
// failing where an arm skips part of the work.
func TestArms(t *testing.T) {
	const n = 40
	s := newScript(n)
	at := newPlaces(t)
	for _, a := range stepArms(t, s, at.disk) {
		t.Run(a.name(), func(t *testing.T) {
			p, _, err := playOnce(a, s, at)
			if err != nil {
				t.Fatal(err)
			}
			for k := 1; k <= n; k++ {
				if p.at[k].IsZero() || p.at[k].Before(p.at[k-1]) {
					t.Fatalf("turn %d asked for at %v, before turn %d at %v", k+1, p.at[k], k, p.at[k-1])
				}
			}
		})
	}

	// An eino agent that rewrites its state to the last two messages
	// still writes every file, but its model is not sent the history.
	t.Run("control/eino-drops-history", func(t *testing.T) {
		e, err := newEinoArm(context.Background(), n, func(_ context.Context, msgs []*schema.Message) []*schema.Message {
			return msgs[max(0, len(msgs)-2):]
		})
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := playOnce(e, s, at)
		if p == nil {
			t.Fatal(err)
		}
		if !errors.Is(err, errHistory) || !errors.Is(p.err, errHistory) {
			t.Fatalf("a play without the history: %v; want a history error", err)
		}
	})
	// io-harness told the model's window folds the history when it
	// passes the window's share: the check sees it, so the benchmark's
	// arm, which passes the check, sends the whole history. The system
	// prompt and tools count about 3,900 tokens (the harness's estimate
	// errs high) and a step about 80, so an 8,000-token window's share
	// (0.6) is passed after a dozen steps.
	t.Run("control/harness-folds", func(t *testing.T) {
		mem, err := sqlite.OpenMemory(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		h, err := newHarnessArm("harness-window", s, mem, 8000)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := playOnce(h, s, at)
		if p == nil {
			t.Fatal(err)
		}
		if err == nil || !errors.Is(p.err, errHistory) {
			t.Fatalf("a run whose history is folded: %v (model: %v); want a history error", err, p.err)
		}
	})
	// A write_file that reports a write it did not make fails the
	// workspace check.
	t.Run("control/no-write", func(t *testing.T) {
		a := newLangchaingoArm(n)
		ws := t.TempDir()
		p := newPlay(s, ws)
		p.noWrite = true
		answer, err := a.play(withPlay(context.Background(), p), p)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.check(answer); err == nil || !strings.Contains(err.Error(), "workspace") {
			t.Fatalf("check of a play that wrote nothing: %v; want a workspace error", err)
		}
	})
}

// tally is what one arm spent over a benchmark's runs.
type tally struct {
	d             time.Duration
	allocs, bytes uint64
	// early and late are the times of steps 10 to 20 and of the last 10
	// steps of every run: from a turn's request to the next one's.
	early, late []time.Duration
}

// median returns the median of ds, in µs.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]+s[(len(s)-1)/2]) / 2e3
}

// BenchmarkSteps plays the step task of N steps with every arm,
// interleaved in one loop (the order rotating each iteration, a GC before
// each run) so that machine noise falls on all, and reports per arm the
// µs and allocations per model turn, the ratio of io-harness to each
// peer, and, from N = 500, growth: the median time of the last 10 steps
// over that of steps 10 to 20 (1 is flat). Medians, because a window of
// ten steps of some µs each is moved by one preemption on a shared
// machine.
func BenchmarkSteps(b *testing.B) {
	for _, n := range []int{4, 50, 500, 2000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) { benchSteps(b, n) })
	}
}

func benchSteps(b *testing.B, n int) {
	s := newScript(n)
	at := newPlaces(b)
	as := stepArms(b, s, at.disk)
	tallies := make(map[string]*tally, len(as))
	for _, a := range as {
		tallies[a.name()] = &tally{}
	}
	var m0, m1 runtime.MemStats
	b.ResetTimer()
	for i := range b.N {
		for j := range as {
			a := as[(i+j)%len(as)]
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&m0)
			b.StartTimer()
			p, d, err := playOnce(a, s, at)
			b.StopTimer()
			runtime.ReadMemStats(&m1)
			if err != nil {
				b.Fatal(err)
			}
			t := tallies[a.name()]
			t.d += d
			t.allocs += m1.Mallocs - m0.Mallocs
			t.bytes += m1.TotalAlloc - m0.TotalAlloc
			if n >= 30 {
				for k := 10; k < 20; k++ {
					t.early = append(t.early, p.at[k+1].Sub(p.at[k]))
					t.late = append(t.late, p.at[n-19+k].Sub(p.at[n-20+k]))
				}
			}
			if err := os.RemoveAll(p.dir); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()

	turns := float64(b.N * (n + 1))
	perStep := func(d time.Duration, steps float64) float64 { return float64(d) / 1e3 / steps }
	var table strings.Builder
	fmt.Fprintf(&table, "N=%d, %d run(s) of each arm; a step is a model turn\n  %-13s %9s %8s %9s", n, b.N, "arm", "µs/step", "allocs", "B")
	if n >= 30 {
		fmt.Fprintf(&table, " %13s %13s %7s", "µs 10-20 med", "µs last10 med", "growth")
	}
	for _, a := range as {
		t := tallies[a.name()]
		us := perStep(t.d, turns)
		b.ReportMetric(us, a.name()+"-µs/step")
		b.ReportMetric(float64(t.allocs)/turns, a.name()+"-allocs/step")
		fmt.Fprintf(&table, "\n  %-13s %9.1f %8.0f %9.0f", a.name(), us, float64(t.allocs)/turns, float64(t.bytes)/turns)
		if n >= 30 {
			early, late := median(t.early), median(t.late)
			fmt.Fprintf(&table, " %13.1f %13.1f %7.2f", early, late, late/early)
			if n >= 500 {
				b.ReportMetric(late/early, a.name()+"-growth")
			}
		}
	}
	ratio := func(x, y string) float64 { return float64(tallies[x].d) / float64(tallies[y].d) }
	for _, r := range [][2]string{
		{"harness-mem", "eino"}, {"harness-mem", "langchaingo"}, {"harness-mem", "direct"}, {"harness-mem", "direct-tool"},
		{"harness-disk", "eino"}, {"harness-disk", "langchaingo"}, {"harness-disk", "harness-mem"},
	} {
		b.ReportMetric(ratio(r[0], r[1]), strings.TrimPrefix(r[0], "harness-")+"/"+strings.TrimPrefix(r[1], "harness-"))
	}
	if finalRun(b) {
		b.Log(table.String())
	}
}

// finalRun reports whether b's run is the one whose result is printed,
// as far as it can tell: with -benchtime Nx, the run of N iterations
// (the framework first runs one, whose log would crowd out the final
// one's: it keeps ten lines of a benchmark's output); otherwise every run.
func finalRun(b *testing.B) bool {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return true
	}
	v := f.Value.String()
	n, err := strconv.Atoi(strings.TrimSuffix(v, "x"))
	if !strings.HasSuffix(v, "x") || err != nil {
		return true
	}
	return b.N == n
}
