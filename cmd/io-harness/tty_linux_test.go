package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the controlling side and the
// terminal a program sees.
func openPTY(t *testing.T) (ctl, tty *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the terminal: %v", err)
	}
	t.Cleanup(func() { ctl.Close(); tty.Close() })
	return ctl, tty
}

// runWithStdin runs the CLI with stdin set to f.
func runWithStdin(t *testing.T, dir string, f *os.File, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Stdin = dir, f
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// Attack (issue 15): stdin is /dev/null, as under cron, systemd or ssh -n.
// It is a character device, which the old check took for a terminal: the
// run asked, read end-of-input as a denial and escalated (exit 6). It must
// defer (exit 5). Negative control: a real terminal on stdin is asked.
func TestDevNullIsNotATerminal(t *testing.T) {
	dir := t.TempDir()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if st, _ := null.Stat(); st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("control: %s is not a character device here", os.DevNull)
	}
	r := runWithStdin(t, dir, null, "run", writeFixture(t, dir, "approve"))
	if r.code != exitAwaiting || strings.Contains(r.stderr, "approve?") {
		t.Errorf("stdin /dev/null: %s", r)
	}

	ctl, tty := openPTY(t)
	go func() {
		// Answer the question when it is asked.
		buf := make([]byte, 4096)
		var seen strings.Builder
		for {
			n, err := ctl.Read(buf)
			if err != nil {
				return
			}
			seen.Write(buf[:n])
			if strings.Contains(seen.String(), "approve?") {
				ctl.Write([]byte("y\n"))
				return
			}
		}
	}()
	// Both streams on the terminal: the question is written to it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", writeFixture(t, dir, "approve"))
	cmd.Dir, cmd.Stdin, cmd.Stderr = dir, tty, tty
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if err != nil {
		t.Errorf("stdin a terminal, answered y: %v\n%s", err, out.String())
	}
}
