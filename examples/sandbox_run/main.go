// Command sandbox_run shows a command contained by the strongest sandbox
// backend this host has: what it sees of the host, what it may write,
// and the caps that kill it.
//
//	go run ./examples/sandbox_run            # the strongest backend
//	go run ./examples/sandbox_run -backend floor
//
// It runs four commands in one sandbox: a look around (its pid, the
// host's /etc, a write beside its workdir and one outside it), a sleep
// that outlives the wall clock, a writer that outlives the output cap,
// and a fork loop that outlives the process cap.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// look reports what the command can see and do, one fact a line.
const look = `echo "pid: $$"
if echo x > inside.txt; then echo "workdir write: allowed"; else echo "workdir write: refused"; fi
if echo x > /etc/io-harness-sandbox-run 2>/dev/null; then echo "outside write: ALLOWED"; rm -f /etc/io-harness-sandbox-run; else echo "outside write: refused"; fi
if test -r /etc/passwd; then echo "host /etc: readable"; fi
echo "processes visible: $(ls -d /proc/[0-9]* | wc -l)"`

func main() {
	backend := flag.String("backend", "", "backend to use (empty: the strongest that works)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *backend); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox_run:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, backend string) error {
	sb, err := sandbox.New(ctx, &sandbox.Options{Backend: backend})
	if err != nil {
		return err
	}
	e := sb.Enforcement()
	fmt.Fprintf(w, "backend: %s (spawner %s)\n", sb.Name(), e.Spawner)
	for _, f := range e.Fallbacks {
		fmt.Fprintf(w, "skipped: %s: %s\n", f.Backend, f.Reason)
	}
	if e.Gaps != "" {
		fmt.Fprintf(w, "does not protect: %s\n", e.Gaps)
	}

	res, err := sb.Run(ctx, &sandbox.Spec{Argv: []string{"/bin/sh", "-c", look}})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n$ look around (exit %d, %v)\n%s", res.ExitCode, time.Duration(res.Duration).Round(time.Millisecond), res.Stdout)

	for _, c := range []struct {
		name   string
		argv   []string
		limits sandbox.Limits
	}{
		{"sleep forever, wall clock 300ms", []string{"/bin/sleep", "1000"}, sandbox.Limits{Wall: sandbox.Duration(300 * time.Millisecond)}},
		{"yes, output cap 64 KiB", []string{"/usr/bin/yes"}, sandbox.Limits{Output: 64 << 10}},
		{"fork loop, 32 processes", []string{"/bin/sh", "-c", "while :; do sleep 1000 & done"}, sandbox.Limits{Processes: 32, Wall: sandbox.Duration(10 * time.Second)}},
	} {
		res, err := sb.Run(ctx, &sandbox.Spec{Argv: c.argv, Limits: c.limits})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n$ %s\ncap hit: %s after %v (%s)\n", c.name, capName(res.CapHit),
			time.Duration(res.Duration).Round(time.Millisecond), strings.TrimSpace(signal(res)))
	}
	return nil
}

func capName(c sandbox.Cap) string {
	if c == sandbox.CapNone {
		return "none"
	}
	return string(c)
}

func signal(r *sandbox.Result) string {
	if r.Signal != "" {
		return "killed by " + r.Signal
	}
	return fmt.Sprintf("exit %d", r.ExitCode)
}
