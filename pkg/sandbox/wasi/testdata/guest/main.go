//go:build wasip1

// Command guest is the tests' WASI program: its first argument names what
// to try, and it reports like the native escape suite's payload: exit 0
// when the attempt succeeded, 3 when it was refused, 4 when the guest
// itself broke. Build it with GOOS=wasip1 GOARCH=wasm.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

const (
	escaped   = 0
	contained = 3
	broken    = 4
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: guest OP [ARG...]")
		os.Exit(broken)
	}
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func run(op string, args []string) int {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	verdict := func(err error) int {
		if err != nil {
			fmt.Println("refused:", err)
			return contained
		}
		fmt.Println("done")
		return escaped
	}
	switch op {
	case "write": // create the file args[0]
		return verdict(os.WriteFile(arg(0), []byte("escaped\n"), 0o644))
	case "read": // read a byte of args[0]
		f, err := os.Open(arg(0))
		if err == nil {
			_, err = f.Read(make([]byte, 1))
			f.Close()
		}
		return verdict(err)
	case "cat": // print args[0]
		b, err := os.ReadFile(arg(0))
		if err != nil {
			fmt.Println("refused:", err)
			return contained
		}
		os.Stdout.Write(b)
		return escaped
	case "ls": // list the directory args[0]
		es, err := os.ReadDir(arg(0))
		if err != nil {
			fmt.Println("refused:", err)
			return contained
		}
		for _, e := range es {
			fmt.Println(e.Name())
		}
		return escaped
	case "symlink-write": // link "link" to args[0], then write link/args[1]
		if err := os.Symlink(arg(0), "link"); err != nil {
			fmt.Println("symlink:", err)
			return broken
		}
		return verdict(os.WriteFile("link/"+arg(1), []byte("escaped\n"), 0o644))
	case "symlink-read": // link "link" to args[0], then read link/args[1]
		if err := os.Symlink(arg(0), "link"); err != nil {
			fmt.Println("symlink:", err)
			return broken
		}
		_, err := os.ReadFile("link/" + arg(1))
		return verdict(err)
	case "rawopen": // path_open args[0] as given, relative to the first preopen
		return verdict(rawOpen(arg(0)))
	case "tcp": // connect to args[0]
		c, err := net.DialTimeout("tcp", arg(0), 2*time.Second)
		if err == nil {
			c.Close()
		}
		return verdict(err)
	case "mem": // grow the heap by 16 MiB at a time until something stops us
		var keep [][]byte
		for i := 0; ; i++ {
			b := make([]byte, 16<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = byte(i)
			}
			keep = append(keep, b)
			if i%16 == 0 {
				fmt.Fprintln(os.Stderr, "allocated", (i+1)*16, "MiB")
			}
		}
	case "spin":
		for {
		}
	case "sleep":
		time.Sleep(time.Hour)
		return broken
	case "output": // write args[0] bytes to stdout
		n, _ := strconv.Atoi(arg(0))
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for n > 0 {
			k := min(n, len(line))
			os.Stdout.Write(line[:k])
			n -= k
		}
		return escaped
	case "filesize": // write a file of args[0] bytes
		n, _ := strconv.Atoi(arg(0))
		f, err := os.Create("big")
		if err != nil {
			return verdict(err)
		}
		buf := make([]byte, 64<<10)
		for n > 0 && err == nil {
			var k int
			k, err = f.Write(buf[:min(n, len(buf))])
			n -= k
		}
		f.Close()
		return verdict(err)
	case "openmany": // open args[0] times, holding every file, until one fails
		return openMany(atoi(arg(0)), "")
	case "exhaust": // open files until one fails, report to the file args[0] too, then wait
		return openMany(1<<30, arg(0))
	case "fill": // write args[1] bytes to the file args[0]
		f, err := os.Create(arg(0))
		if err != nil {
			return verdict(err)
		}
		_, err = writeN(f, atoi(arg(1)))
		f.Close()
		return verdict(err)
	case "manyfiles": // create args[1] empty files in the directory args[0]
		for i := range atoi(arg(1)) {
			if err := os.WriteFile(fmt.Sprintf("%s/f%d", arg(0), i), nil, 0o644); err != nil {
				fmt.Println("after", i, "files")
				return verdict(err)
			}
		}
		return verdict(nil)
	case "unlinkopen": // args[1] times: write args[2] bytes to a file in args[0], remove it, keep it open
		var keep []*os.File
		for i := range atoi(arg(1)) {
			name := fmt.Sprintf("%s/u%d", arg(0), i)
			f, err := os.Create(name)
			if err == nil {
				_, err = writeN(f, atoi(arg(2)))
			}
			if err == nil {
				err = os.Remove(name)
			}
			if err != nil {
				return verdict(err)
			}
			keep = append(keep, f)
		}
		return verdict(nil)
	case "rewrite": // args[1] times: write args[2] bytes to the file args[0], replacing it
		for range atoi(arg(1)) {
			if err := os.WriteFile(arg(0), make([]byte, atoi(arg(2))), 0o644); err != nil {
				return verdict(err)
			}
		}
		return verdict(nil)
	case "renameover": // args[1] times: write args[2] bytes to a new file and rename it over args[0]
		for i := range atoi(arg(1)) {
			tmp := fmt.Sprintf("%s.%d", arg(0), i)
			if err := os.WriteFile(tmp, make([]byte, atoi(arg(2))), 0o644); err != nil {
				return verdict(err)
			}
			if err := os.Rename(tmp, arg(0)); err != nil {
				return verdict(err)
			}
		}
		return verdict(nil)
	case "sparse": // write one byte at offset args[1] of the file args[0]
		f, err := os.Create(arg(0))
		if err == nil {
			_, err = f.WriteAt([]byte{1}, int64(atoi(arg(1))))
			f.Close()
		}
		return verdict(err)
	case "exit":
		n, _ := strconv.Atoi(arg(0))
		return n
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		return escaped
	case "args":
		fmt.Println(strings.Join(os.Args, "\n"))
		return escaped
	case "pwd":
		wd, err := os.Getwd()
		if err != nil {
			return verdict(err)
		}
		fmt.Println(wd)
		return escaped
	case "stdin":
		io.Copy(os.Stdout, os.Stdin)
		return escaped
	case "clock": // the year, and how long a 50 ms sleep took
		start := time.Now()
		time.Sleep(50 * time.Millisecond)
		fmt.Println(time.Now().Year(), time.Since(start).Milliseconds())
		return escaped
	case "rand":
		b := make([]byte, 16)
		rand.Read(b)
		fmt.Println(hex.EncodeToString(b))
		return escaped
	case "tmp": // make a temporary file where TMPDIR says
		f, err := os.CreateTemp("", "guest-")
		if err != nil {
			return verdict(err)
		}
		f.Close()
		fmt.Println(f.Name())
		return escaped
	case "trap": // load from past the end of linear memory: a wasm trap
		p := unsafe.Pointer(uintptr(0xfffffff0))
		fmt.Println(*(*byte)(p))
		return broken
	case "wc": // count the words of args[0], the way a small tool would
		b, err := os.ReadFile(arg(0))
		if err != nil {
			return verdict(err)
		}
		fmt.Println(len(strings.Fields(string(b))))
		return escaped
	}
	fmt.Fprintln(os.Stderr, "unknown op", op)
	return broken
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// writeN writes n bytes to f, 64 KiB at a time.
func writeN(f *os.File, n int) (int, error) {
	buf := make([]byte, 64<<10)
	total := 0
	for total < n {
		k, err := f.Write(buf[:min(n-total, len(buf))])
		total += k
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// openMany opens a file in /tmp n times, holding each, until an open
// fails. It prints how many it held and the errno that stopped it. With a
// marker, it then writes "held" to the marker (opened beforehand) and
// waits to be ended, holding the files.
func openMany(n int, marker string) int {
	var mark *os.File
	if marker != "" {
		var err error
		if mark, err = os.Create(marker); err != nil {
			fmt.Println("marker:", err)
			return broken
		}
	}
	if err := os.WriteFile("/tmp/o", nil, 0o644); err != nil {
		fmt.Println("create:", err)
		return broken
	}
	var held []*os.File
	var err error
	for len(held) < n {
		var f *os.File
		if f, err = os.Open("/tmp/o"); err != nil {
			break
		}
		held = append(held, f)
	}
	why := "none"
	switch {
	case errors.Is(err, syscall.EMFILE):
		why = "EMFILE"
	case errors.Is(err, syscall.ENFILE):
		why = "ENFILE"
	case err != nil:
		why = err.Error()
	}
	line := fmt.Sprintf("held %d errno %s\n", len(held), why)
	fmt.Print(line)
	if mark != nil {
		mark.Write([]byte(line)) // and kept open: closing it would free a descriptor
		time.Sleep(time.Hour)
	}
	if err != nil {
		return contained
	}
	return escaped
}

// pathOpen is WASI's path_open, called directly so that the path reaches
// the host exactly as given, without Go's cleaning.
//
//go:wasmimport wasi_snapshot_preview1 path_open
func pathOpen(fd int32, dirflags uint32, path unsafe.Pointer, pathLen uint32, oflags uint32, rightsBase uint64, rightsInheriting uint64, fdflags uint32, newfd unsafe.Pointer) uint32

// rawOpen opens path for reading relative to fd 3, the first preopened
// directory (the guest's /).
func rawOpen(path string) error {
	b := []byte(path)
	var fd int32
	const rightsAll = 1<<29 - 1
	if errno := pathOpen(3, 1, unsafe.Pointer(&b[0]), uint32(len(b)), 0, rightsAll, rightsAll, 0, unsafe.Pointer(&fd)); errno != 0 {
		return fmt.Errorf("path_open %q: errno %d", path, errno)
	}
	return nil
}
