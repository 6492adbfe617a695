package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// The example shows containment and the three caps in the strongest
// backend, and the same look around in the floor, which sees the host:
// the negative control that shows the containment checks can fail.
func TestSandboxRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the example's commands (/bin/sh, /usr/bin/yes) and its expectations are Linux's")
	}
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, &out, ""); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	if !strings.HasPrefix(s, "backend: linux-ns") {
		t.Skipf("the strongest backend here is not linux-ns, so its containment cannot be shown:\n%s", s)
	}
	for _, want := range []string{
		"pid: 1\n",
		"workdir write: allowed\n",
		"outside write: refused\n",
		"cap hit: wall after",
		"cap hit: output after",
		"cap hit: processes after",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}

	out.Reset()
	if err := run(ctx, &out, "floor"); err != nil {
		t.Fatalf("floor: %v\n%s", err, out.String())
	}
	if f := out.String(); strings.Contains(f, "pid: 1\n") || strings.Contains(f, "processes visible: 4\n") {
		t.Errorf("the floor should see the host's pids (negative control):\n%s", f)
	}
}
