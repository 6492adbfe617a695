package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJobLimits(t *testing.T) {
	got := jobLimitsFor(Limits{CPU: Duration(90 * time.Second), Memory: 2 << 30, Processes: 64})
	want := jobLimits{
		flags:     0x4 | 0x8 | 0x200 | 0x400 | 0x2000,
		userTime:  900_000_000, // 90 s in 100 ns units
		memory:    2 << 30,
		processes: 64,
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(jobLimits{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	caps := map[uint32]Cap{1: CapCPU, 3: CapProcesses, 9: CapMemory, 10: CapMemory, 4: CapNone, 8: CapNone, 0: CapNone}
	for msg, want := range caps {
		if got := jobCap(msg); got != want {
			t.Errorf("jobCap(%d) = %q, want %q", msg, got, want)
		}
	}
}
