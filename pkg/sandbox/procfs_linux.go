package sandbox

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// clockTick is the unit of CPU times in /proc/<pid>/stat (USER_HZ, 100
// on every Linux architecture this package builds for).
const clockTick = 10 * time.Millisecond

// procStat is what the watcher and the sweep need from one
// /proc/<pid>/stat.
type procStat struct {
	state   byte
	pgrp    int
	session int
	cpu     time.Duration // own and reaped children's user + system time
	threads int
	rss     int64 // bytes
}

// readStat parses the stat file of one process, reading it into buf
// with plain system calls: the sweep reads every process of the host,
// often.
func readStat(path string, buf []byte) (procStat, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return procStat{}, false
	}
	b := buf[:n]
	// The command name may contain anything, so parse after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	var f [22][]byte // fields 3 to 24 of proc(5); field k is f[k-3]
	k := 0
	for rest := b[i+1:]; k < len(f); k++ {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		if end == 0 {
			break
		}
		f[k], rest = rest[:end], rest[end:]
	}
	if k < len(f) {
		return procStat{}, false
	}
	num := func(k int) int64 {
		var v int64
		for _, c := range f[k-3] {
			if c < '0' || c > '9' {
				break
			}
			v = v*10 + int64(c-'0')
		}
		return v
	}
	ticks := num(14) + num(15) + num(16) + num(17)
	return procStat{
		state:   f[0][0],
		pgrp:    int(num(5)),
		session: int(num(6)),
		cpu:     time.Duration(ticks) * clockTick,
		threads: int(num(20)),
		rss:     num(24) * int64(os.Getpagesize()),
	}, true
}

// sumProcs sums the stats of the processes listed in dir (a /proc mount)
// that keep returns true for.
func sumProcs(dir string, keep func(pid int, st procStat) bool) (usage, bool) {
	f, err := os.Open(dir)
	if err != nil {
		return usage{}, false
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return usage{}, false
	}
	var u usage
	buf := make([]byte, 1024)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		st, ok := readStat(dir+"/"+n+"/stat", buf)
		if !ok || st.state == 'Z' || !keep(pid, st) {
			continue
		}
		u.rss += st.rss
		u.tasks += st.threads
		u.cpu += st.cpu
	}
	return u, true
}

// nsUsage samples a pid namespace through its init's view of its own
// /proc: only the sandbox's processes, however many the host has. Until
// the init has its own /proc (a wrapper may report its pid before it has
// built the sandbox), the view is the host's, and the sample is empty.
func nsUsage(initPid int) (usage, bool) {
	root := "/proc/" + strconv.Itoa(initPid)
	var own, seen unix.Stat_t
	if unix.Stat(root+"/ns/pid", &own) != nil || unix.Stat(root+"/root/proc/1/ns/pid", &seen) != nil ||
		own.Ino != seen.Ino || own.Dev != seen.Dev {
		return usage{}, true
	}
	u, ok := sumProcs(root+"/root/proc", func(int, procStat) bool { return true })
	if !ok {
		return usage{}, true // the namespace is going away
	}
	return u, true
}

// sessionUsage samples the processes of session sid.
func sessionUsage(sid int) (usage, bool) {
	return sumProcs("/proc", func(_ int, st procStat) bool { return st.session == sid })
}

// sweepSession kills every process of session sid. It kills the
// leader's process group first, in one system call that a fork cannot
// race, then every process group and process it finds in the session,
// again and again until a pass finds none (a killed process forks no
// more, so the passes converge however fast the session forks) or 10
// seconds have passed. It returns how many it last found alive.
func sweepSession(sid int) int {
	syscall.Kill(-sid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for {
		found := 0
		sumProcs("/proc", func(pid int, st procStat) bool {
			if st.session == sid && pid != sid {
				syscall.Kill(-st.pgrp, syscall.SIGKILL)
				syscall.Kill(pid, syscall.SIGKILL)
				found++
			}
			return false
		})
		if found == 0 || time.Now().After(deadline) {
			return found
		}
	}
}
