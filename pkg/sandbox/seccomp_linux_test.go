//go:build linux && (amd64 || arm64)

package sandbox

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The spawner, and so its seccomp filter, is built for linux/amd64 and
// linux/arm64 only (kexec_file_load has no number on some others).

// seccompDenied is every system call the spawner's seccomp filter refuses
// outright, with EPERM, whatever its arguments: the oracle
// TestSeccompDenied holds the filter to. A call dropped from the filter's
// list is a failure here, not a change of what is expected.
var seccompDenied = []struct {
	name string
	nr   uintptr
}{
	{"ptrace", unix.SYS_PTRACE},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD},
	{"process_madvise", unix.SYS_PROCESS_MADVISE},
	{"mount", unix.SYS_MOUNT},
	{"umount2", unix.SYS_UMOUNT2},
	{"pivot_root", unix.SYS_PIVOT_ROOT},
	{"chroot", unix.SYS_CHROOT},
	{"open_tree", unix.SYS_OPEN_TREE},
	{"move_mount", unix.SYS_MOVE_MOUNT},
	{"fsopen", unix.SYS_FSOPEN},
	{"fsconfig", unix.SYS_FSCONFIG},
	{"fsmount", unix.SYS_FSMOUNT},
	{"fspick", unix.SYS_FSPICK},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR},
	{"setns", unix.SYS_SETNS},
	{"kexec_load", unix.SYS_KEXEC_LOAD},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"init_module", unix.SYS_INIT_MODULE},
	{"finit_module", unix.SYS_FINIT_MODULE},
	{"delete_module", unix.SYS_DELETE_MODULE},
	{"bpf", unix.SYS_BPF},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
	{"keyctl", unix.SYS_KEYCTL},
	{"add_key", unix.SYS_ADD_KEY},
	{"request_key", unix.SYS_REQUEST_KEY},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER},
	{"userfaultfd", unix.SYS_USERFAULTFD},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
	{"acct", unix.SYS_ACCT},
	{"swapon", unix.SYS_SWAPON},
	{"swapoff", unix.SYS_SWAPOFF},
	{"reboot", unix.SYS_REBOOT},
	{"quotactl", unix.SYS_QUOTACTL},
	{"vhangup", unix.SYS_VHANGUP},
}

// TestSeccompDenied: each call of seccompDenied, made inside the sandbox,
// fails with EPERM on the backends that claim Seccomp. None of the calls
// runs: the payload's own filter hands every call the sandbox's filter
// lets through back to the payload, which answers it with supervised.
// So the kernel's own refusals (most of these need a capability the
// command lacks, and fail with EPERM too) cannot stand in for the
// filter's, and a reboot or a module load is as safe to try as a
// userfaultfd. The backends without seccomp see supervised for every
// call: the negative control.
func TestSeccompDenied(t *testing.T) {
	var args []string
	for _, c := range seccompDenied {
		args = append(args, strconv.FormatUint(uint64(c.nr), 10))
	}
	negative := false
	for _, n := range linuxSandboxes(t, true) {
		t.Run(n.label, func(t *testing.T) {
			res := attempt(t, n.sb, Spec{}, "denied", args...)
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			got := map[string]syscall.Errno{}
			for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				nr, v, _ := strings.Cut(line, "=")
				e, _ := strconv.Atoi(v)
				got[nr] = syscall.Errno(e)
			}
			all := true
			for i, c := range seccompDenied {
				e, ok := got[args[i]]
				switch {
				case !ok:
					t.Errorf("%s (%d): the payload did not report it:\n%s", c.name, c.nr, res.Stdout)
				case res.Enforced.Seccomp && e == supervised:
					t.Errorf("ESCAPED: %s let %s through its seccomp filter", n.label, c.name)
				case res.Enforced.Seccomp && e != unix.EPERM:
					t.Errorf("%s: errno %d (%v), want EPERM", c.name, e, e)
				}
				all = all && e == supervised
			}
			if !res.Enforced.Seccomp && all {
				negative = true
			}
		})
	}
	if !negative {
		t.Errorf("no backend without seccomp let every call through to the payload's answer: the probe tells nothing")
	}
}
