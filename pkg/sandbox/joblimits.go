package sandbox

import "time"

// The Job Object limit flags and completion messages used here, from
// winnt.h, so that the mapping is testable on every OS.
const (
	jobLimitJobTime          = 0x00000004
	jobLimitActiveProcess    = 0x00000008
	jobLimitJobMemory        = 0x00000200
	jobLimitDieOnException   = 0x00000400
	jobLimitKillOnJobClose   = 0x00002000
	jobMsgEndOfJobTime       = 1
	jobMsgActiveProcessLimit = 3
	jobMsgProcessMemoryLimit = 9
	jobMsgJobMemoryLimit     = 10
)

// jobLimits is what a run asks of its Job Object.
type jobLimits struct {
	flags uint32
	// userTime is the job's user-mode CPU time limit, in 100 ns units.
	userTime int64
	// memory is the job's committed memory limit, in bytes.
	memory uint64
	// processes is the most processes alive in the job at once.
	processes uint32
}

// jobLimitsFor maps the limits onto a Job Object: CPU time, memory and
// process count for the whole job, every process killed when the job is
// closed, and no error dialog to wait on. Windows has no file-size or
// open-file limit for a job. Job CPU time counts user mode only.
func jobLimitsFor(l Limits) jobLimits {
	return jobLimits{
		flags: jobLimitJobTime | jobLimitActiveProcess | jobLimitJobMemory |
			jobLimitDieOnException | jobLimitKillOnJobClose,
		userTime:  int64(time.Duration(l.CPU) / 100),
		memory:    uint64(l.Memory),
		processes: uint32(l.Processes),
	}
}

// jobCap names the cap behind a job's completion message, if any.
func jobCap(msg uint32) Cap {
	switch msg {
	case jobMsgEndOfJobTime:
		return CapCPU
	case jobMsgActiveProcessLimit:
		return CapProcesses
	case jobMsgProcessMemoryLimit, jobMsgJobMemoryLimit:
		return CapMemory
	}
	return CapNone
}
