//go:build !linux && !darwin

package wasi

// mappedMemory is not available here: linear memory comes from the heap.
type mappedMemory = heapMemory

func mapMemory(uint64, *allocator) *mappedMemory { return nil }
