package sandbox

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSeatbeltProfile(t *testing.T) {
	p := seatbeltProfile([]string{"/private/var/folders/x/work", `/odd "dir"\`}, 0)
	for _, want := range []string{
		"(version 1)\n(deny default)\n",
		"(allow file-read*)",
		"(allow file-write*\n  (subpath \"/private/var/folders/x/work\")\n  (subpath \"/odd \\\"dir\\\"\\\\\"))",
		"(literal \"/dev/null\")",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("profile lacks %q:\n%s", want, p)
		}
	}
	for _, bad := range []string{"network", "(allow default)", "(allow file-write* (subpath \"/\"))"} {
		if strings.Contains(p, bad) {
			t.Errorf("profile without a proxy contains %q:\n%s", bad, p)
		}
	}
	p = seatbeltProfile(nil, 40123)
	if !strings.Contains(p, `(allow network-outbound (remote ip "localhost:40123"))`) || strings.Contains(p, "(allow file-write*\n") {
		t.Errorf("proxied profile:\n%s", p)
	}
	if n := strings.Count(p, "(") - strings.Count(p, ")"); n != 0 {
		t.Errorf("unbalanced parentheses (%d)", n)
	}
}

// TestUlimitScript runs the macOS limits script with bash here and reads
// the limits back from /proc.
func TestUlimitScript(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the script with")
	}
	if _, err := os.Stat("/proc/self/limits"); err != nil {
		t.Skip("no /proc/self/limits to read the limits back")
	}
	l := Limits{CPU: Duration(2500 * time.Millisecond), FileSize: 1<<20 + 1, OpenFiles: 100}
	out, err := exec.Command(bash, "-c", ulimitScript(l), "bash", "cat", "/proc/self/limits").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string][2]string{
		"Max cpu time":       {"3", "4"},
		"Max file size":      {strconv.Itoa(1<<20 + 1024), strconv.Itoa(1<<20 + 1024)},
		"Max open files":     {"100", "100"},
		"Max core file size": {"0", "0"},
	}
	for _, line := range strings.Split(string(out), "\n") {
		for name, w := range want {
			if strings.HasPrefix(line, name) {
				f := strings.Fields(strings.TrimPrefix(line, name))
				if len(f) < 2 || f[0] != w[0] || f[1] != w[1] {
					t.Errorf("%s: %v, want soft %s hard %s", name, f, w[0], w[1])
				}
				delete(want, name)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("limits not found: %v\n%s", want, out)
	}
}
