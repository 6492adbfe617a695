package wasi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// TestDiskCap is the attack on the host's disk: a guest writes past the
// disk limit into each place it can write, and tries the ways around an
// account of its writes: many empty files, data it removes but keeps
// open, a sparse file, a file it grows by truncation. Each must end the
// run with the disk cap, the write that crosses it failing. The negative
// control is the same attack under the default limit (1 GiB), where it
// succeeds: the /tmp of the run was uncapped before. The legitimate
// patterns that rewrite a file in place, or replace it by renaming, must
// go on succeeding under the small limit: the space they free is given
// back.
func TestDiskCap(t *testing.T) {
	sb := newSandbox(t, nil)
	const limit = 1 << 20
	rw := hostScratch(t)
	tests := []struct {
		name string
		op   string
		args []string
		// capped is whether the attack crosses a 1 MiB limit.
		capped bool
		// file, if set, is a workdir file that must hold at most the limit.
		file string
	}{
		{"fill /tmp", "fill", []string{"/tmp/big", "4194304"}, true, ""},
		{"fill the workdir", "fill", []string{"big", "4194304"}, true, "big"},
		{"fill a writable mount", "fill", []string{filepath.Join(rw, "big"), "4194304"}, true, ""},
		{"many empty files", "manyfiles", []string{"/tmp", "1000"}, true, ""},
		{"data removed but kept open", "unlinkopen", []string{"/tmp", "16", "262144"}, true, ""},
		{"a sparse file", "sparse", []string{"/tmp/sparse", "104857600"}, true, ""},
		{"a file rewritten in place", "rewrite", []string{"/tmp/r", "16", "262144"}, false, ""},
		{"a file replaced by rename", "renameover", []string{"/tmp/r", "16", "262144"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd := realTempDir(t)
			spec := sandbox.Spec{Workdir: wd, Writable: []string{rw}}
			// The control: the default limit lets the attack through.
			if res := attempt(t, sb, spec, tt.op, tt.args...); res.ExitCode != escaped || res.CapHit != sandbox.CapNone {
				t.Fatalf("control: under the default disk limit: exit %d cap %q stdout %q stderr %.300q; the case proves nothing",
					res.ExitCode, res.CapHit, res.Stdout, res.Stderr)
			}
			os.Remove(filepath.Join(rw, "big"))
			os.Remove(filepath.Join(wd, "big"))

			spec.Limits.Disk = limit
			res := attempt(t, sb, spec, tt.op, tt.args...)
			if !tt.capped {
				if res.ExitCode != escaped || res.CapHit != sandbox.CapNone {
					t.Errorf("exit %d cap %q stdout %q: freed space was not given back", res.ExitCode, res.CapHit, res.Stdout)
				}
				return
			}
			if res.CapHit != sandbox.CapDisk || res.ExitCode != -1 {
				t.Errorf("exit %d cap %q stdout %q stderr %.300q; want -1 and the disk cap", res.ExitCode, res.CapHit, res.Stdout, res.Stderr)
			}
			if tt.file != "" {
				if fi, err := os.Stat(filepath.Join(wd, tt.file)); err != nil || fi.Size() > limit {
					t.Errorf("the file on the host: %v, %v; want at most %d bytes", fi, err, limit)
				}
			}
			if fi, err := os.Stat(filepath.Join(rw, "big")); err == nil && fi.Size() > limit {
				t.Errorf("the writable mount's file has %d bytes, over the %d limit", fi.Size(), limit)
			}
		})
	}
}

// TestDiskCapEvent checks what the cap says: a cap_hit event naming the
// disk and the limit.
func TestDiskCapEvent(t *testing.T) {
	var rec recorder
	sb := newSandbox(t, &Options{Observer: rec.observe})
	attempt(t, sb, sandbox.Spec{Limits: sandbox.Limits{Disk: 1 << 16}}, "fill", "/tmp/big", "1048576")
	var hits []sandbox.Event
	for _, e := range rec.all() {
		if e.Kind == sandbox.EventCapHit {
			hits = append(hits, e)
		}
	}
	if len(hits) != 1 || hits[0].Cap != sandbox.CapDisk || !strings.Contains(hits[0].Detail, "disk limit of 65536 bytes") {
		t.Errorf("cap_hit events %+v; want one, for the disk, naming its limit", hits)
	}
}
