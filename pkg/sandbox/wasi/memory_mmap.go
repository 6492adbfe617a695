//go:build linux || darwin

package wasi

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// mappedMemory is linear memory in an mmap reservation: inaccessible
// beyond what the guest has grown to, never moved, unmapped by Free.
type mappedMemory struct {
	a         *allocator
	buf       []byte // the whole reservation
	committed int    // bytes made readable and writable
}

// mapMemory reserves n bytes of address space, or returns nil (the caller
// then uses the heap).
func mapMemory(n uint64, a *allocator) *mappedMemory {
	ps := uint64(os.Getpagesize())
	size := (n + ps - 1) / ps * ps
	if size == 0 || size > math.MaxInt {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return &mappedMemory{a: a, buf: b}
}

func (m *mappedMemory) Reallocate(size uint64) []byte {
	if !m.a.allow(size) || size > uint64(len(m.buf)) {
		return nil
	}
	if int(size) > m.committed {
		ps := os.Getpagesize()
		end := min((int(size)+ps-1)/ps*ps, len(m.buf))
		if err := syscall.Mprotect(m.buf[m.committed:end], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			m.a.fail(fmt.Sprintf("the host could not provide %d bytes of linear memory: %v", size, err))
			return nil
		}
		m.committed = end
	}
	return m.buf[:size:size]
}

func (m *mappedMemory) Free() {
	if m.buf != nil {
		syscall.Munmap(m.buf)
		m.buf = nil
	}
}
