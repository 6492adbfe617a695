//go:build !unix

package wasi

// hostFDBudget is how many host descriptors the guests of a Sandbox may
// hold at once. Windows has no per-process descriptor limit to halve; its
// handle table holds millions.
func hostFDBudget() int64 { return defaultFDBudget }
