package wasi

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// The most a module may declare. wazero sizes its structures from what a
// module declares before it has read the entries: a 15-byte module that
// declares 2^32 functions makes its decoder ask the Go runtime for
// hundreds of gigabytes, and the runtime ends the whole process
// ("fatal error: runtime: out of memory"), which no recover catches. So
// every count and size is checked here, before wazero sees the module:
// against these limits, and against the bytes left to hold the entries.
//
// The limits are the ones every browser applies to WebAssembly (the JS API
// specification's "Implementation-defined limits"), so a module a browser
// runs is not refused for its shape, except for tables, which are held to
// maxTableEntries, and the locals of all functions together, which the
// specification does not bound.
const (
	maxTypes        = 1_000_000
	maxParams       = 1_000
	maxResults      = 1_000
	maxImports      = 100_000
	maxExports      = 100_000
	maxFunctions    = 1_000_000 // imported and defined
	maxGlobals      = 1_000_000
	maxDataSegments = 100_000
	maxTables       = 100_000
	maxFunctionSize = 7_654_321 // bytes of one function body, its locals included
	maxLocals       = 50_000    // declared by one function

	// maxTableEntries is the most entries a table may hold. A table
	// declared with a larger maximum, or none, gets this maximum, so that
	// table.grow past it returns -1 to the guest; one whose minimum is
	// larger does not run. Go's and LLVM's tables hold one entry per
	// function whose address is taken: a few tens of thousands.
	maxTableEntries = 1 << 20
	// maxElemEntries is the most entries all element segments together
	// may hold: no more than the entries of a maximal table, four times
	// over. wazero decodes each into a 32-byte expression.
	maxElemEntries = 4 * maxTableEntries
	// extraLocals bounds the locals of all functions together beyond one
	// per byte of code: a local nobody uses is declared in a byte or two,
	// but costs the compiler an instruction at every call.
	extraLocals = maxLocals
)

// tableEntrySize is the memory one table entry takes in wazero: a
// pointer-sized reference.
const tableEntrySize = uint64(unsafe.Sizeof(uintptr(0)))

// LimitError is a module that declares more of something than the wasi
// backend allows. Such a module does not run: the run's exit status is
// 126, as for any module that cannot be executed, and its stderr is this
// error. [Check] returns it to a caller that wants to know in advance.
type LimitError struct {
	// Limit names what the module declares too many of, or too large:
	// "functions", "locals in one function", "table entries", ...
	Limit string `json:"limit"`
	// Value is what the module declares (for a count read from the
	// module, the count it claims, not how many entries follow).
	Value uint64 `json:"value"`
	// Max is the most the backend allows.
	Max uint64 `json:"max"`
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the module declares %d %s, over the wasi backend's limit of %d", e.Value, e.Limit, e.Max)
}

// errMalformed wraps every error that says a module is not well formed.
var errMalformed = errors.New("not a valid WebAssembly module")

// Check reports whether wasm is a module the wasi backend will hand to
// wazero: well formed as far as its sections, counts and sizes go, and
// within the backend's limits. It returns a *LimitError for a module over
// a limit, and an error wrapping neither for one that is malformed. A nil
// error does not mean the module is valid WebAssembly or a WASI command:
// wazero checks the rest.
func Check(wasm []byte) error {
	_, err := inspect(wasm)
	return err
}

// shape is what inspect learnt of a module.
type shape struct {
	// wasm is the module as wazero is to see it: without custom
	// sections, and with each table's maximum at most maxTableEntries.
	// It is the input itself when that needed no change.
	wasm []byte
	// minMemory is the memory the module starts with, in bytes.
	minMemory uint64
	// tableBytes is what the module's tables take at their maximum:
	// what a run charges to its memory limit before the guest starts.
	tableBytes uint64
}

// table is one entry of the table section, split around its limits so
// that they can be rewritten.
type table struct {
	head, tail []byte // the bytes before and after the limits
	min, max   uint32
	hasMax     bool
}

// inspect walks the module's sections, checks every count and size in
// them, and returns the module as wazero is to see it. It reads each byte
// at most once and allocates only for the rewritten module.
func inspect(b []byte) (*shape, error) {
	if len(b) < 8 || !bytes.Equal(b[:4], []byte("\x00asm")) {
		return nil, fmt.Errorf("%w: no \\0asm header", errMalformed)
	}
	if !bytes.Equal(b[4:8], []byte{1, 0, 0, 0}) {
		return nil, fmt.Errorf("%w: binary format version %x, not 1", errMalformed, b[4:8])
	}
	in := &inspector{}
	c := &cursor{b: b, off: 8}
	type span struct {
		id         byte
		start, end int // the whole section, id and size included
	}
	var keep []span
	rewrite := false
	for c.left() > 0 && c.err == nil {
		start := c.off
		id := c.byte()
		size := c.u32()
		if c.err != nil {
			break
		}
		if uint64(size) > uint64(c.left()) {
			c.fail("section %d is %d bytes, past the end of the module", id, size)
			break
		}
		body := &cursor{b: b[c.off : c.off+int(size)], what: sectionName(id)}
		c.off += int(size)
		if id == 0 {
			rewrite = true // custom sections are dropped: nothing reads them
			body.name()
			body.off = len(body.b)
		} else {
			keep = append(keep, span{id, start, c.off})
			in.section(id, body)
		}
		if body.err == nil && in.err == nil && body.left() != 0 {
			body.fail("%d bytes after its last entry", body.left())
		}
		if err := firstError(in.err, body.err); err != nil {
			return nil, err
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if err := in.finish(); err != nil {
		return nil, err
	}

	sh := &shape{wasm: b, minMemory: in.minMemory}
	for i := range in.tables {
		t := &in.tables[i]
		if !t.hasMax || t.max > maxTableEntries {
			t.max, t.hasMax, rewrite = maxTableEntries, true, true
		}
		sh.tableBytes += uint64(t.max) * tableEntrySize
	}
	if !rewrite {
		return sh, nil
	}
	out := make([]byte, 0, len(b))
	out = append(out, b[:8]...)
	for _, s := range keep {
		if s.id != 4 {
			out = append(out, b[s.start:s.end]...)
			continue
		}
		var sec []byte
		sec = appendU32(sec, uint32(len(in.tables)))
		for _, t := range in.tables {
			sec = append(sec, t.head...)
			sec = append(sec, 0x01)
			sec = appendU32(sec, t.min)
			sec = appendU32(sec, t.max)
			sec = append(sec, t.tail...)
		}
		out = append(out, 4)
		out = appendU32(out, uint32(len(sec)))
		out = append(out, sec...)
	}
	sh.wasm = out
	return sh, nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func sectionName(id byte) string {
	names := [...]string{"custom", "type", "import", "function", "table", "memory", "global",
		"export", "start", "element", "code", "data", "data count", "tag"}
	if int(id) < len(names) {
		return names[id] + " section"
	}
	return fmt.Sprintf("section %d", id)
}

// inspector accumulates what the sections declare.
type inspector struct {
	err        error
	types      uint64
	functions  uint64 // imported and defined
	globals    uint64
	tableCount uint64
	elems      uint64
	locals     uint64
	codeBytes  uint64
	minMemory  uint64
	tables     []table
}

func (in *inspector) limit(what string, value, max uint64) bool {
	if value > max && in.err == nil {
		in.err = &LimitError{Limit: what, Value: value, Max: max}
	}
	return in.err == nil
}

// count reads a vector's length: at most max, and no more entries than
// the bytes left could hold at minSize bytes each.
func (in *inspector) count(c *cursor, what string, max uint64, minSize int) uint64 {
	n := uint64(c.u32())
	if c.err != nil || !in.limit(what, n, max) {
		return 0
	}
	if n*uint64(minSize) > uint64(c.left()) {
		c.fail("%d %s declared in %d bytes", n, what, c.left())
		return 0
	}
	return n
}

func (in *inspector) section(id byte, c *cursor) {
	switch id {
	case 1:
		in.typeSection(c)
	case 2:
		in.importSection(c)
	case 3:
		n := in.count(c, "functions", maxFunctions, 1)
		in.functions += n
		in.limit("functions", in.functions, maxFunctions)
		for i := uint64(0); i < n && c.err == nil; i++ {
			c.u32()
		}
	case 4:
		n := in.count(c, "tables", maxTables, 3)
		for i := uint64(0); i < n && c.ok() && in.err == nil; i++ {
			in.table(c)
		}
	case 5:
		n := in.count(c, "memories", 1, 2)
		for i := uint64(0); i < n && c.ok(); i++ {
			_, min, _, _ := c.limits()
			in.minMemory = uint64(min) * pageSize
		}
	case 6:
		n := in.count(c, "globals", maxGlobals, 3)
		in.globals += n
		for i := uint64(0); i < n && c.ok(); i++ {
			c.valType()
			c.byte() // mutability
			c.constExpr()
		}
	case 7:
		n := in.count(c, "exports", maxExports, 3)
		for i := uint64(0); i < n && c.ok(); i++ {
			c.name()
			c.byte()
			c.u32()
		}
	case 8:
		c.u32()
	case 9:
		in.elementSection(c)
	case 10:
		in.codeSection(c)
	case 11:
		n := in.count(c, "data segments", maxDataSegments, 2)
		for i := uint64(0); i < n && c.ok(); i++ {
			switch c.u32() {
			case 0:
				c.constExpr()
			case 1:
			case 2:
				c.u32()
				c.constExpr()
			default:
				c.fail("data segment %d: unknown kind", i)
			}
			c.skip(c.u32())
		}
	case 12:
		c.u32()
	case 13:
		n := in.count(c, "tags", maxTypes, 2)
		for i := uint64(0); i < n && c.ok(); i++ {
			c.byte()
			c.u32()
		}
	default:
		c.fail("unknown section id")
	}
}

func (in *inspector) typeSection(c *cursor) {
	n := in.count(c, "types", maxTypes, 3)
	funcType := func() {
		if c.byte() != 0x60 && c.ok() {
			c.fail("type %d is not a function type", in.types)
		}
		in.types++
		in.limit("types", in.types, maxTypes)
		for _, l := range []struct {
			what string
			max  uint64
		}{{"parameters of one function type", maxParams}, {"results of one function type", maxResults}} {
			k := in.count(c, l.what, l.max, 1)
			for j := uint64(0); j < k && c.ok(); j++ {
				c.valType()
			}
		}
	}
	for i := uint64(0); i < n && c.ok() && in.err == nil; i++ {
		if c.peek() != 0x4e { // a recursive group of types
			funcType()
			continue
		}
		c.byte()
		k := in.count(c, "types", maxTypes, 3)
		for j := uint64(0); j < k && c.ok() && in.err == nil; j++ {
			funcType()
		}
	}
}

func (in *inspector) importSection(c *cursor) {
	n := in.count(c, "imports", maxImports, 4)
	for i := uint64(0); i < n && c.ok() && in.err == nil; i++ {
		mod, name := c.name(), c.name()
		kind := c.byte()
		if !c.ok() {
			return
		}
		what := ""
		switch kind {
		case 0:
			c.u32()
			in.functions++
			in.limit("functions", in.functions, maxFunctions)
			continue
		case 1:
			what = "a table"
		case 2:
			what = "a memory"
		case 3:
			what = "a global"
		case 4:
			what = "a tag"
		default:
			c.fail("import %d: unknown kind %d", i, kind)
			return
		}
		in.err = fmt.Errorf("%w: it imports %s (%q.%q), and WASI preview 1 provides none; a WASI command defines and exports its memory", errMalformed, what, mod, name)
	}
}

// table reads one table type, checks its limits and keeps it for the
// rewrite.
func (in *inspector) table(c *cursor) {
	start := c.off
	init := false
	if c.peek() == 0x40 { // a table with an initialiser
		c.byte()
		if c.byte() != 0 && c.ok() {
			c.fail("table %d: malformed initialiser prefix", len(in.tables))
		}
		init = true
	}
	c.refType()
	head := c.b[start:c.off]
	flag, min, max, hasMax := c.limits()
	if !c.ok() {
		return
	}
	if flag&2 != 0 {
		c.fail("table %d is shared; tables cannot be", len(in.tables))
		return
	}
	if hasMax && max < min {
		c.fail("table %d: maximum %d below its minimum %d", len(in.tables), max, min)
		return
	}
	if !in.limit("table entries", uint64(min), maxTableEntries) {
		return
	}
	mid := c.off
	if init {
		c.constExpr()
	}
	in.tables = append(in.tables, table{head: head, tail: c.b[mid:c.off], min: min, max: max, hasMax: hasMax})
}

func (in *inspector) elementSection(c *cursor) {
	n := in.count(c, "element segments", maxElemEntries, 2)
	for i := uint64(0); i < n && c.ok() && in.err == nil; i++ {
		kind := c.u32()
		if !c.ok() {
			return
		}
		if kind > 7 {
			c.fail("element segment %d: unknown kind %d", i, kind)
			return
		}
		// Bit 0: passive or declarative; bit 1: an explicit table
		// index (active) or declarative (passive); bit 2: expressions
		// rather than function indices.
		active, exprs := kind&1 == 0, kind&4 != 0
		if active && kind&2 != 0 {
			c.u32() // table index
		}
		if active {
			c.constExpr() // offset
		}
		if kind&3 != 0 { // an element kind or reference type follows
			if exprs {
				c.refType()
			} else if c.byte() != 0 && c.ok() {
				c.fail("element segment %d: unknown element kind", i)
			}
		}
		minSize := 1
		if exprs {
			minSize = 2
		}
		k := in.count(c, "element segment entries", maxElemEntries, minSize)
		in.elems += k
		if !in.limit("element segment entries", in.elems, maxElemEntries) {
			return
		}
		for j := uint64(0); j < k && c.ok(); j++ {
			if exprs {
				c.constExpr()
			} else {
				c.u32()
			}
		}
	}
}

func (in *inspector) codeSection(c *cursor) {
	in.codeBytes = uint64(len(c.b))
	n := in.count(c, "function bodies", maxFunctions, 2)
	for i := uint64(0); i < n && c.ok() && in.err == nil; i++ {
		size := c.u32()
		if !c.ok() || !in.limit("bytes in one function body", uint64(size), maxFunctionSize) {
			return
		}
		if uint64(size) > uint64(c.left()) {
			c.fail("function body %d is %d bytes, past the end of the section", i, size)
			return
		}
		body := cursor{b: c.b[c.off : c.off+int(size)]}
		c.off += int(size)
		groups := in.count(&body, "groups of locals in one function", maxLocals, 2)
		var locals uint64
		for j := uint64(0); j < groups && body.ok(); j++ {
			locals += uint64(body.u32())
			body.valType()
			if !in.limit("locals in one function", locals, maxLocals) {
				return
			}
		}
		if body.err != nil {
			c.fail("function body %d: %s", i, strings.TrimPrefix(body.err.Error(), errMalformed.Error()+": "))
			return
		}
		if body.left() == 0 {
			c.fail("function body %d has no code", i)
			return
		}
		in.locals += locals
	}
}

// finish checks what only the whole module tells.
func (in *inspector) finish() error {
	in.limit("locals in all functions", in.locals, in.codeBytes+extraLocals)
	return in.err
}

// cursor reads a module's bytes. Its first error sticks: later reads
// return zero values, and the caller checks err when it matters.
type cursor struct {
	b    []byte
	off  int
	what string // the section or body being read, for messages
	err  error
}

func (c *cursor) ok() bool  { return c.err == nil }
func (c *cursor) left() int { return len(c.b) - c.off }

func (c *cursor) fail(format string, args ...any) {
	if c.err != nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if c.what != "" {
		msg = c.what + ": " + msg
	}
	c.err = fmt.Errorf("%w: %s", errMalformed, msg)
}

func (c *cursor) peek() byte {
	if c.err != nil || c.off >= len(c.b) {
		return 0
	}
	return c.b[c.off]
}

func (c *cursor) byte() byte {
	if c.err != nil {
		return 0
	}
	if c.off >= len(c.b) {
		c.fail("unexpected end")
		return 0
	}
	v := c.b[c.off]
	c.off++
	return v
}

func (c *cursor) skip(n uint32) {
	if c.err != nil {
		return
	}
	if uint64(n) > uint64(c.left()) {
		c.fail("%d bytes declared, %d left", n, c.left())
		return
	}
	c.off += int(n)
}

// u32 reads an unsigned LEB128 number of at most 32 bits, exactly as
// wazero's decoder does.
func (c *cursor) u32() uint32 {
	var v uint32
	for i, s := 0, uint(0); i < 5; i, s = i+1, s+7 {
		b := c.byte()
		if c.err != nil {
			return 0
		}
		if b < 0x80 {
			if i == 4 && b&0xf0 != 0 {
				break
			}
			return v | uint32(b)<<s
		}
		v |= uint32(b&0x7f) << s
	}
	c.fail("an unsigned number overflows 32 bits")
	return 0
}

// sleb skips a signed LEB128 number of at most maxLen bytes.
func (c *cursor) sleb(maxLen int) {
	for range maxLen {
		if c.byte()&0x80 == 0 || c.err != nil {
			return
		}
	}
	c.fail("a signed number is longer than %d bytes", maxLen)
}

// name skips a name: a length and that many bytes.
func (c *cursor) name() string {
	n := c.u32()
	if c.err != nil {
		return ""
	}
	if uint64(n) > uint64(c.left()) {
		c.fail("a name of %d bytes, %d left", n, c.left())
		return ""
	}
	s := string(c.b[c.off : c.off+int(min(n, 64))])
	c.off += int(n)
	return s
}

// valType skips a value type.
func (c *cursor) valType() {
	switch b := c.byte(); b {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69: // i32 i64 f32 f64 v128 funcref externref exnref
	case 0x63, 0x64: // (ref null ht), (ref ht)
		c.sleb(5)
	default:
		if c.err == nil {
			c.fail("unknown value type 0x%02x", b)
		}
	}
}

// refType skips a reference type.
func (c *cursor) refType() {
	switch b := c.byte(); b {
	case 0x70, 0x6f, 0x69:
	case 0x63, 0x64:
		c.sleb(5)
	default:
		if c.err == nil {
			c.fail("unknown reference type 0x%02x", b)
		}
	}
}

// limits reads a table's or memory's limits and their flag (bit 0: a
// maximum follows; bit 1: shared).
func (c *cursor) limits() (flag byte, min, max uint32, hasMax bool) {
	switch flag = c.byte(); flag {
	case 0x00, 0x02:
		return flag, c.u32(), 0, false
	case 0x01, 0x03:
		min = c.u32()
		return flag, min, c.u32(), true
	default:
		if c.err == nil {
			c.fail("unknown limits flag 0x%02x", flag)
		}
	}
	return flag, 0, 0, false
}

// constExpr skips a constant expression, with the instructions wazero
// accepts in one.
func (c *cursor) constExpr() {
	for c.ok() {
		switch op := c.byte(); op {
		case 0x0b: // end
			return
		case 0x41: // i32.const
			c.sleb(5)
		case 0x42: // i64.const
			c.sleb(10)
		case 0x43: // f32.const
			c.skip(4)
		case 0x44: // f64.const
			c.skip(8)
		case 0x23, 0xd2: // global.get, ref.func
			c.u32()
		case 0xd0: // ref.null
			switch c.peek() {
			case 0x70, 0x6f, 0x69:
				c.byte()
			default:
				c.u32()
			}
		case 0xfd: // v128.const
			if c.byte() != 0x0c && c.ok() {
				c.fail("a vector instruction other than v128.const in a constant expression")
			}
			c.skip(16)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constants: i32/i64 add, sub, mul
		default:
			if c.err == nil {
				c.fail("opcode 0x%02x in a constant expression", op)
			}
		}
	}
}

// appendU32 appends v as an unsigned LEB128 number.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
