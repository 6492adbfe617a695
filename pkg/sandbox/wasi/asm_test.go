package wasi

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Enough of the WebAssembly binary format to write attack modules by
// hand, byte by byte, as an attacker would.

// leb is v as an unsigned LEB128 number.
func leb(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// sleb is v as a signed LEB128 number.
func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// vec is a vector: its length, then its items.
func vec(items ...[]byte) []byte { return cat(leb(uint64(len(items))), cat(items...)) }

// str is a name.
func str(s string) []byte { return cat(leb(uint64(len(s))), []byte(s)) }

// section is a section of the given id.
func section(id byte, content ...[]byte) []byte {
	c := cat(content...)
	return cat([]byte{id}, leb(uint64(len(c))), c)
}

// rawSection is a section whose content is given as is, its declared
// size included: for sections that lie about their size.
func rawSection(id byte, content ...[]byte) []byte { return cat([]byte{id}, cat(content...)) }

func wasmModule(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

// body is a function body: no locals, then code, then end.
func body(code ...[]byte) []byte {
	b := cat([]byte{0}, cat(code...), []byte{0x0b})
	return cat(leb(uint64(len(b))), b)
}

// The pieces of a minimal WASI command: type 0 is func(), type 1
// func(i32); function 0 is the import wasi_snapshot_preview1.proc_exit.
var (
	typesSection  = section(1, vec([]byte{0x60, 0, 0}, []byte{0x60, 1, 0x7f, 0}))
	procExit      = section(2, vec(cat(str("wasi_snapshot_preview1"), str("proc_exit"), []byte{0}, leb(1))))
	memorySection = section(5, vec([]byte{0, 1}))
	// exportsStart exports function 1 as _start and memory 0.
	exportsStart = section(7, vec(cat(str("_start"), []byte{0}, leb(1)), cat(str("memory"), []byte{2}, leb(0))))
)

// tableGrowModule is the table attack: a module with one funcref table
// of the given limits whose _start grows it by delta entries, then exits
// 3 (contained) if table.grow returned -1, else 0 (escaped).
func tableGrowModule(limits []byte, delta int32) []byte {
	return wasmModule(
		typesSection,
		procExit,
		section(3, vec(leb(0))),
		section(4, vec(cat([]byte{0x70}, limits))),
		memorySection,
		exportsStart,
		section(10, vec(body(
			[]byte{0xd0, 0x70},                    // ref.null func
			cat([]byte{0x41}, sleb(int64(delta))), // i32.const delta
			[]byte{0xfc, 15, 0},                   // table.grow 0
			[]byte{0x41, 0x7f, 0x46},              // i32.const -1; i32.eq
			[]byte{0x04, 0x40},                    // if
			[]byte{0x41, 3, 0x10, 0},              // proc_exit(3)
			[]byte{0x0b},                          // end
			[]byte{0x41, 0, 0x10, 0},              // proc_exit(0)
		))),
	)
}

// recursionModule is a _start that calls itself for ever.
func recursionModule() []byte {
	return wasmModule(
		section(1, vec([]byte{0x60, 0, 0})),
		section(3, vec(leb(0))),
		memorySection,
		section(7, vec(cat(str("_start"), []byte{0}, leb(0)), cat(str("memory"), []byte{2}, leb(0)))),
		section(10, vec(body([]byte{0x10, 0}))),
	)
}

// writeWasm writes b to a .wasm file in a fresh directory.
func writeWasm(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
