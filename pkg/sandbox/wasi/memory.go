package wasi

import (
	"fmt"

	"github.com/tetratelabs/wazero/experimental"
)

// pageSize is the size of a WebAssembly memory page.
const pageSize = 64 << 10

// maxMemory is the most a 32-bit WebAssembly memory can address.
const maxMemory = 65536 * pageSize

// allocator gives a run's module instance its linear memory, capped at
// the run's memory limit. It replaces wazero's default, which allocates
// from the Go heap:
//
//   - With WithMemoryCapacityFromMax the default reserves the whole limit
//     as one Go slice. The first run gets fresh pages from the OS, but a
//     later run in the same process reuses freed heap spans, which Go
//     zeroes in full: measured here at 3.2–6.2 s per run and 2 GiB more
//     resident memory per run at the 2 GiB default limit.
//   - Without it every memory.grow copies the memory: reaching 1 GiB took
//     9–34 s (research/sandbox.md §4).
//
// Where it can (Linux and macOS), the allocator reserves address space
// with mmap, without access, makes it accessible as the guest grows, and
// unmaps it when the instance closes: growth never copies, nothing is
// zeroed by hand, and the memory leaves with the run. Elsewhere it grows
// a heap slice by doubling, which copies at most twice the final size.
//
// Growth past the limit, or that the host cannot map, is reported to
// fail, which kills the run with the memory cap; if fail returns,
// memory.grow returns -1 to the guest.
type allocator struct {
	limit uint64
	fail  func(detail string)
	// made are the memories allocated, for free. A run's guest is one
	// instance with at most one memory, instantiated on the run's
	// goroutine.
	made []experimental.LinearMemory
}

func (a *allocator) Allocate(_, maxBytes uint64) experimental.LinearMemory {
	reserve := min(maxBytes, a.limit)
	var m experimental.LinearMemory
	if mm := mapMemory(reserve, a); mm != nil {
		m = mm
	} else {
		m = &heapMemory{a: a, reserve: reserve}
	}
	a.made = append(a.made, m)
	return m
}

// free frees every memory allocated. Free may already have been called.
func (a *allocator) free() {
	for _, m := range a.made {
		m.Free()
	}
}

// allow reports whether the guest may have size bytes of memory.
func (a *allocator) allow(size uint64) bool {
	if size <= a.limit {
		return true
	}
	a.fail(fmt.Sprintf("the guest asked for %d bytes of linear memory, over the %d limit", size, a.limit))
	return false
}

// heapMemory is linear memory in a Go slice that doubles as it grows.
type heapMemory struct {
	a       *allocator
	reserve uint64
	buf     []byte
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	if !m.a.allow(size) {
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	c := min(max(size, 2*uint64(cap(m.buf)), 1<<20), max(m.reserve, size))
	b := make([]byte, size, c)
	copy(b, m.buf)
	m.buf = b
	return b
}

func (m *heapMemory) Free() { m.buf = nil }
