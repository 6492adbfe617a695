package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkSpawn measures spawn-to-exit of /bin/true in each Linux
// backend that works here, against a plain os/exec of /bin/true and a
// plain bwrap --unshare-all --ro-bind / / /bin/true, with every arm run
// once per round in a rotating order so that load drifts hit all alike.
// It reports each arm's median and the ratios the sandbox is held to:
// at most 2x a plain exec, under half of bwrap, flat with host memory
// (the 2GiB variant holds and touches 2 GiB in the host process).
//
//	go test -run '^$' -bench Spawn -benchtime 200x ./pkg/sandbox/
func BenchmarkSpawn(b *testing.B) {
	truePath := "/bin/true"
	if _, err := os.Stat(truePath); err != nil {
		b.Skip("no /bin/true to spawn")
	}
	type arm struct {
		name string
		run  func() error
	}
	arms := []arm{{"exec", func() error { return exec.Command(truePath).Run() }}}
	if bw, err := findBwrap(); err == nil {
		arms = append(arms, arm{"bwrap-raw", func() error {
			return exec.Command(bw, "--unshare-all", "--ro-bind", "/", "/", truePath).Run()
		}})
	} else {
		b.Logf("no bwrap arm: %v", err)
	}
	type want struct {
		name string
		opts Options
	}
	wants := []want{{BackendLinuxNS, Options{Backend: BackendLinuxNS}}}
	if helper, err := helperPath(); err == nil {
		wants = append(wants, want{BackendLinuxNS + "-helper", Options{Backend: BackendLinuxNS, HelperPath: helper}})
	} else {
		b.Logf("no %s-helper arm: %v", BackendLinuxNS, err)
	}
	wants = append(wants, want{BackendLinuxLandlock, Options{Backend: BackendLinuxLandlock}},
		want{BackendBwrap, Options{Backend: BackendBwrap}}, want{BackendFloor, Options{Backend: BackendFloor}})
	for _, w := range wants {
		sb, err := New(context.Background(), &w.opts)
		if err != nil {
			b.Logf("no %s arm: %v", w.name, err)
			continue
		}
		arms = append(arms, arm{w.name, func() error {
			res, err := sb.Run(context.Background(), &Spec{Argv: []string{truePath}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			return err
		}})
	}
	for _, ballast := range []int{0, 2} {
		b.Run(fmt.Sprintf("host%dGiB", ballast), func(b *testing.B) {
			held := make([]byte, ballast<<30)
			for i := 0; i < len(held); i += 4096 {
				held[i] = 1
			}
			times := make([][]time.Duration, len(arms))
			b.ResetTimer()
			for i := range b.N {
				for j := range arms {
					k := (i + j) % len(arms)
					start := time.Now()
					if err := arms[k].run(); err != nil {
						b.Fatalf("%s: %v", arms[k].name, err)
					}
					times[k] = append(times[k], time.Since(start))
				}
			}
			b.StopTimer()
			median := map[string]float64{}
			for k, a := range arms {
				slices.Sort(times[k])
				median[a.name] = float64(times[k][len(times[k])/2].Microseconds()) / 1000
				b.ReportMetric(median[a.name], a.name+"-ms")
			}
			for _, a := range arms {
				if a.name == "exec" || a.name == "bwrap-raw" {
					continue
				}
				b.ReportMetric(median[a.name]/median["exec"], a.name+"/exec")
				if bw, ok := median["bwrap-raw"]; ok {
					b.ReportMetric(median[a.name]/bw, a.name+"/bwrap-raw")
				}
			}
			runtime.KeepAlive(held) // the ballast stays resident to the end
		})
	}
}
