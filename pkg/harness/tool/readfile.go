package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// maxWholeFile is the largest file read_file reads whole; a larger one
// needs a line range.
const maxWholeFile = 256 << 10

// maxCountedFile is the largest file whose lines read_file counts to tell
// the model how many there are when it refuses to read it whole.
const maxCountedFile = 256 << 20

// readChunk is the size of the reads of a file read by range.
const readChunk = 64 << 10

// readFile is the read_file tool.
type readFile struct{ single bool }

type readArgs struct {
	Path      string `json:"path"`
	StartLine *int   `json:"start_line"`
	EndLine   *int   `json:"end_line"`
}

const readFileDesc = "Read a text file. The output is one header line, `path (lines A-B of N)`, " +
	"followed by the exact text of those lines, so text copied from it matches for edit_file. " +
	"Without start_line and end_line the whole file is read; a file over 256 KiB must be read by line range. " +
	"Lines count from 1 and the range is inclusive. Binary files are refused. " +
	"The output is limited to 32 KiB; when a range does not fit, the output says which start_line to continue from."

const readFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root, with / separators.%s"},
    "start_line": {"type": "integer", "minimum": 1, "description": "First line to read, counting from 1. Default 1."},
    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to read, inclusive. Default: the end of the file."}
  },
  "required": [%s],
  "additionalProperties": false
}`

// Spec describes read_file.
func (t readFile) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "read_file", Description: readFileDesc, Parameters: pathSchema(readFileSchema, t.single, nil)}
}

// Idempotent reports true: read_file changes nothing.
func (readFile) Idempotent() bool { return true }

// ReadOnly reports that the tool only reads.
func (readFile) ReadOnly() bool { return true }

// Call reads the file.
func (t readFile) Call(ctx context.Context, env *Env, args json.RawMessage) Result {
	return invoke(ctx, env, args, t.call)
}

func (readFile) call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a readArgs
	if err := decodeArgs(raw, &a); err != nil {
		return badArgs(err)
	}
	start, end := 1, 0 // end 0: to the end of the file
	if a.StartLine != nil {
		if *a.StartLine < 1 {
			return badArgs(&argError{Field: "start_line", Msg: fmt.Sprintf("expected a line number of 1 or more (lines count from 1), got %d", *a.StartLine)})
		}
		start = *a.StartLine
	}
	if a.EndLine != nil {
		if *a.EndLine < 1 {
			return badArgs(&argError{Field: "end_line", Msg: fmt.Sprintf("expected a line number of 1 or more (lines count from 1), got %d", *a.EndLine)})
		}
		if *a.EndLine < start {
			return badArgs(&argError{Field: "end_line", Msg: fmt.Sprintf("end_line %d is before start_line %d", *a.EndLine, start)})
		}
		end = *a.EndLine
	}
	ranged := a.StartLine != nil || a.EndLine != nil

	p, refused := filePath(env, a.Path)
	if refused != nil {
		return *refused
	}
	act, stop := authorizePath(ctx, env, Action{Act: policy.Read, Target: p})
	if stop != nil {
		return *stop
	}
	p = act.Target
	at := mark(env)
	fi, bad := statRegular(env.Root, p, "read_file")
	if bad != nil {
		return *bad
	}
	f, err := env.Root.Open(p)
	if err != nil {
		return fsFailure(p, err)
	}
	defer f.Close()

	sel := lineSel{start: start, end: end, budget: maxOutput - outputReserve - len(p)}
	read := sel.readWhole
	if ranged {
		read = sel.readRange
	}
	if bad := read(ctx, f, p, fi.Size()); bad != nil {
		return *bad
	}
	sel.finish()
	saw(env, p, at)
	return sel.result(p, ranged)
}

// readWhole feeds s the whole file f at p, of size bytes, unless it is
// too big or binary.
func (s *lineSel) readWhole(ctx context.Context, f *os.File, p string, size int64) *Result {
	if size > maxWholeFile {
		r := tooBig(ctx, f, p, size)
		return &r
	}
	data, err := io.ReadAll(io.LimitReader(f, maxWholeFile+1))
	if err != nil {
		r := fsFailure(p, err)
		return &r
	}
	if len(data) > maxWholeFile { // the file grew since the stat
		r := tooBig(ctx, f, p, size)
		return &r
	}
	if isBinary(data) {
		r := binaryFile(p, int64(len(data)))
		return &r
	}
	s.feed(data)
	return nil
}

// readRange feeds s the file f at p, of size bytes, in chunks, unless it
// is binary: a NUL byte in its head, or invalid UTF-8 in the lines kept.
func (s *lineSel) readRange(ctx context.Context, f *os.File, p string, size int64) *Result {
	buf := make([]byte, readChunk)
	for first := true; ; first = false {
		if err := ctx.Err(); err != nil {
			r := errorf("read_file %s: cancelled: %v", p, err)
			return &r
		}
		n, err := io.ReadFull(f, buf)
		if first && hasNUL(buf[:n]) {
			r := binaryFile(p, size)
			return &r
		}
		s.feed(buf[:n])
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			r := fsFailure(p, err)
			return &r
		}
	}
	if !utf8.Valid(s.out) {
		r := binaryFile(p, size)
		return &r
	}
	return nil
}

// tooBig returns the refusal of a whole-file read of the file f at p,
// which holds size bytes.
func tooBig(ctx context.Context, f *os.File, p string, size int64) Result {
	lines := ""
	if size <= maxCountedFile {
		if _, err := f.Seek(0, io.SeekStart); err == nil {
			if n, err := countReader(ctx, f); err == nil {
				lines = fmt.Sprintf(" and %s", plural(n, "line"))
			}
		}
	}
	return errorf("%s has %d bytes%s, over the %d-byte (256 KiB) limit for reading a whole file; "+
		"ask for a line range with start_line and end_line", p, size, lines, maxWholeFile)
}

// countReader counts the lines of r.
func countReader(ctx context.Context, r io.Reader) (int, error) {
	buf := make([]byte, readChunk)
	n, last := 0, byte('\n')
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		k, err := r.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++
	}
	return n, nil
}

// binaryFile returns the refusal to read a binary file.
func binaryFile(p string, size int64) Result {
	return errorf("%s: binary file, %d bytes; read_file shows text files only", p, size)
}

// lineSel selects the lines start to end (0: the end of the file) of a
// file fed to it in pieces, keeping at most budget bytes of them, and
// counts the file's lines.
type lineSel struct {
	start, end int
	budget     int

	out       []byte
	line      int  // the line the next byte fed belongs to, from 1
	lineStart int  // where the current line starts in out
	last      int  // the last line kept whole
	cut       int  // the first line not kept whole, 0 while all fit
	cutLen    int  // the length of line cut when it was kept in part
	partial   bool // line cut was kept in part, being the first selected
	total     int
	ends      bool // the last byte fed was a newline
}

// feed takes the next piece of the file.
func (s *lineSel) feed(c []byte) {
	if s.line == 0 {
		s.line, s.ends = 1, true
	}
	if len(c) == 0 {
		return
	}
	s.ends = c[len(c)-1] == '\n'
	for len(c) > 0 {
		if s.cut != 0 || (s.end != 0 && s.line > s.end) {
			if s.partial && s.line == s.cut {
				i := bytes.IndexByte(c, '\n')
				if i < 0 {
					s.cutLen += len(c)
				} else {
					s.cutLen += i
				}
			}
			s.line += bytes.Count(c, []byte{'\n'})
			return
		}
		i := bytes.IndexByte(c, '\n')
		seg := c
		if i >= 0 {
			seg = c[:i+1]
		}
		c = c[len(seg):]
		if s.line >= s.start {
			if len(s.out)+len(seg) <= s.budget {
				s.out = append(s.out, seg...)
			} else {
				s.cut = s.line
				if s.lineStart == 0 {
					// The first selected line alone overflows: keep its head.
					s.cutLen = len(s.out) + len(seg)
					if i >= 0 {
						s.cutLen-- // the newline
					}
					room := s.budget - len(s.out)
					s.out = trimPartialRune(append(s.out, seg[:room]...))
					s.partial = true
				} else {
					s.out = s.out[:s.lineStart]
				}
			}
		}
		if i >= 0 {
			if s.line >= s.start && s.cut == 0 {
				s.last = s.line
			}
			s.line++
			s.lineStart = len(s.out)
		}
	}
}

// finish ends the file.
func (s *lineSel) finish() {
	if s.line == 0 {
		s.line, s.ends = 1, true
	}
	s.total = s.line - 1
	if !s.ends {
		s.total++ // a last line without a newline
		if s.cut == 0 && s.line >= s.start && (s.end == 0 || s.line <= s.end) {
			s.last = s.line
		}
	}
}

// result renders the selection of the file p as the observation.
func (s *lineSel) result(p string, ranged bool) Result {
	if s.total == 0 {
		if ranged {
			return errorf("%s is empty (0 lines)", p)
		}
		return Result{Output: p + " (empty file, 0 lines)"}
	}
	if s.start > s.total {
		return errorf("start_line %d is past the end of %s, which has %s", s.start, p, plural(s.total, "line"))
	}
	end := s.total
	if s.end != 0 {
		end = min(s.end, s.total)
	}
	var b bytes.Buffer
	shownTo := s.last
	if s.partial {
		shownTo = s.cut
	}
	fmt.Fprintf(&b, "%s (lines %d-%d of %d)\n", p, s.start, shownTo, s.total)
	b.Write(s.out)
	if s.cut == 0 {
		return Result{Output: b.String()}
	}
	if b.Len() > 0 && b.Bytes()[b.Len()-1] != '\n' {
		b.WriteByte('\n')
	}
	if s.partial {
		fmt.Fprintf(&b, "[line %d has %d bytes; only its first %d are shown, as the output limit is %d bytes]\n",
			s.cut, s.cutLen, len(s.out), maxOutput)
		if s.cut < end {
			fmt.Fprintf(&b, "[lines %d-%d not shown; call read_file with start_line=%d to continue]", s.cut+1, end, s.cut+1)
		}
		return Result{Output: b.String()}
	}
	fmt.Fprintf(&b, "[lines %d-%d not shown, as the output limit is %d bytes; call read_file with start_line=%d to continue]",
		s.cut, end, maxOutput, s.cut)
	return Result{Output: b.String()}
}
