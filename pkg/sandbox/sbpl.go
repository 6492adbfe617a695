package sandbox

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// seatbeltProfile returns the macOS sandbox profile (SBPL) for a run:
// deny by default; read and execute anywhere; write only beneath the
// writable paths and to the harmless device nodes; no network, except,
// when proxyPort is set, the run's egress proxy on localhost. Unlike
// Landlock's port rule, an SBPL address is exact.
func seatbeltProfile(writable []string, proxyPort int) string {
	var b strings.Builder
	b.WriteString(`(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow file-read*)
(allow file-read-metadata)
(allow sysctl-read)
(allow user-preference-read)
(allow ipc-posix-sem)
(allow ipc-posix-shm)
(allow pseudo-tty)
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.opendirectoryd.membership")
  (global-name "com.apple.system.logger")
  (global-name "com.apple.logd")
  (global-name "com.apple.bsd.dirhelper"))
(allow file-write* file-ioctl
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/tty")
  (literal "/dev/dtracehelper")
  (literal "/dev/ptmx")
  (regex #"^/dev/ttys[0-9]+$"))
`)
	if len(writable) > 0 {
		b.WriteString("(allow file-write*")
		for _, w := range writable {
			fmt.Fprintf(&b, "\n  (subpath %s)", sbplString(w))
		}
		b.WriteString(")\n")
	}
	if proxyPort > 0 {
		fmt.Fprintf(&b, "(allow network-outbound (remote ip \"localhost:%d\"))\n", proxyPort)
	}
	return b.String()
}

// sbplString quotes s as an SBPL string literal.
func sbplString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// ulimitScript is a bash script that sets the run's limits on itself and
// execs "$@", for systems where a child's limits cannot be set from
// outside. The CPU hard limit is one second above the soft one, so that
// SIGXCPU comes first; bash counts file sizes in 1024-byte blocks.
func ulimitScript(l Limits) string {
	cpu := int64(math.Ceil(time.Duration(l.CPU).Seconds()))
	fsize := (l.FileSize + 1023) / 1024
	// The soft limit first: a hard limit below the current soft one is
	// refused.
	return fmt.Sprintf("ulimit -S -t %d && ulimit -H -t %d && ulimit -f %d && ulimit -n %d && ulimit -c 0 && exec \"$@\"",
		cpu, cpu+1, fsize, l.OpenFiles)
}
