package store

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// processStart returns when the process pid started, from the kernel's
// count of clock ticks since boot, to the millisecond the kernel keeps.
func processStart(pid int) (time.Time, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return time.Time{}, false
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ")".
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}, false
	}
	fields := bytes.Fields(stat[i+1:])
	// Field 22 of the whole line is the start time; after the name the
	// state is field 3, so it is index 19 here.
	if len(fields) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(string(fields[19]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	boot, ok := bootTime()
	if !ok {
		return time.Time{}, false
	}
	const hz = 100 // USER_HZ, fixed at 100 on every Linux ABI
	return time.UnixMilli(boot*1000 + ticks*1000/hz), true
}

// bootTime reads the boot time, in seconds since the epoch.
func bootTime() (int64, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// processAlive reports whether the process pid that started at started
// still runs; known is false when that cannot be told.
func processAlive(pid int, started time.Time) (alive, known bool) {
	if pid <= 0 {
		return false, false
	}
	now, ok := processStart(pid)
	if !ok {
		if _, err := os.Stat("/proc/self/stat"); err != nil {
			return false, false // no /proc here: nothing can be told
		}
		return false, true
	}
	return started.IsZero() || now.Equal(started), true
}
