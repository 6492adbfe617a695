package wasi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// maxModuleSize is the largest .wasm file a run loads. The whole file is
// read into memory to be hashed and compiled.
const maxModuleSize = 512 << 20

// wasiModule is the name of the host module a WASI preview 1 command
// imports from.
const wasiModule = "wasi_snapshot_preview1"

// module is one compiled module, shared by every run of the same content
// in a Sandbox.
type module struct {
	// ready is closed once the fields below are set.
	ready chan struct{}
	hash  [sha256.Size]byte
	cm    wazero.CompiledModule
	// bad says why the module cannot run as a WASI preview 1 command.
	// That is the command's failure (exit 126), not the sandbox's.
	bad error
	// minMemory is the memory the module starts with, in bytes.
	minMemory uint64
	// tableBytes is what its tables take at their maximum, in bytes.
	tableBytes uint64
	// took is how long compiling (or loading from the disk cache) took.
	took time.Duration
}

// loadError is a module that could not be loaded: the command's failure,
// reported like a shell reports a program it cannot execute.
type loadError struct {
	code int // 127 not found, 126 otherwise
	msg  string
}

// load returns the compiled form of the module at path, compiling it
// unless this Sandbox already has. Concurrent loads of the same content
// wait for one compilation. cached reports whether the module was
// compiled before this call.
//
// The module is found by the SHA-256 of its content. Reading and hashing
// a 20 MB module costs about 15 ms, as much as running it, so the hash
// of an unchanged file is remembered; see knownHash.
//
// A module that cannot be read or run is a *loadError; the error is the
// context's or the Sandbox's end while waiting for the compilation, which
// goes on regardless and serves later runs.
func (s *wasiSandbox) load(ctx context.Context, path string) (m *module, cached bool, lerr *loadError, err error) {
	f, fi, lerr := openModule(path)
	if lerr != nil {
		return nil, false, lerr, nil
	}
	defer f.Close()
	h, known := s.knownHash(path, fi)
	if known {
		s.mu.Lock()
		m, cached = s.modules[h]
		s.mu.Unlock()
	}
	if !cached {
		b, lerr := readModule(f)
		if lerr != nil {
			return nil, false, lerr, nil
		}
		h = sha256.Sum256(b)
		s.rememberHash(path, fi, h)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, false, nil, closedError("load")
		}
		m, cached = s.modules[h]
		if !cached {
			m = &module{ready: make(chan struct{}), hash: h}
			s.modules[h] = m
			s.inflight.Add(1)
			go s.compile(m, b)
		}
		s.mu.Unlock()
	}
	select {
	case <-m.ready:
	case <-ctx.Done():
		return nil, false, nil, &sandbox.Error{Kind: ctx.Err(), Backend: Backend, Step: "compile"}
	case <-s.life.Done():
		return nil, false, nil, closedError("compile")
	}
	if m.bad != nil {
		return nil, false, &loadError{126, m.bad.Error()}, nil
	}
	return m, cached, nil, nil
}

// fileHash is the content hash of a module file as it was when hashed.
type fileHash struct {
	fi    os.FileInfo
	ctime int64
	hash  [sha256.Size]byte
}

const (
	// maxKnownFiles bounds the remembered hashes; past it they are
	// forgotten, all at once.
	maxKnownFiles = 1024
	// settled is how old a file's last change must be for its hash to be
	// remembered: a change within the same tick of a coarse clock would
	// otherwise go unseen (the rule of the go command's file hash cache).
	settled = 2 * time.Second
)

// knownHash returns the remembered hash of the file at path, if the file
// is still the one that was hashed: the same file (device and inode),
// size, modification time and inode change time. The change time is
// what makes this safe: the guest can set a file's modification time
// back, but every write moves the change time, which nobody but the
// kernel sets. Where the platform does not report it (Windows), nothing
// is remembered and every run hashes.
func (s *wasiSandbox) knownHash(path string, fi os.FileInfo) ([sha256.Size]byte, bool) {
	ct, ok := changeTime(fi)
	if !ok {
		return [sha256.Size]byte{}, false
	}
	s.mu.Lock()
	k, ok := s.files[path]
	s.mu.Unlock()
	if !ok || !os.SameFile(k.fi, fi) || k.ctime != ct || k.fi.Size() != fi.Size() || !k.fi.ModTime().Equal(fi.ModTime()) {
		return [sha256.Size]byte{}, false
	}
	return k.hash, true
}

// rememberHash remembers h as the hash of the file at path, as fi
// describes it, if the file has not changed for a while.
func (s *wasiSandbox) rememberHash(path string, fi os.FileInfo, h [sha256.Size]byte) {
	ct, ok := changeTime(fi)
	if !ok || time.Since(time.Unix(0, ct)) < settled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.files) >= maxKnownFiles {
		clear(s.files)
	}
	s.files[path] = fileHash{fi, ct, h}
}

// compile compiles b into m and checks that it is a WASI preview 1
// command. A module that fails is dropped from the cache, so that a later
// run tries again.
func (s *wasiSandbox) compile(m *module, b []byte) {
	defer s.inflight.Done()
	defer close(m.ready)
	start := time.Now()
	// wazero must not read a module before it is checked: see shape.
	sh, err := inspect(b)
	var cm wazero.CompiledModule
	if err == nil {
		cm, err = s.rt.CompileModule(s.life, sh.wasm)
		if err == nil {
			if err = checkCommand(cm); err != nil {
				cm.Close(context.Background())
			}
		} else {
			err = fmt.Errorf("%w: %v", errMalformed, err)
		}
	}
	m.took = time.Since(start)
	if err != nil {
		m.bad = err
		s.mu.Lock()
		delete(s.modules, m.hash)
		s.mu.Unlock()
		return
	}
	m.cm = cm
	m.minMemory, m.tableBytes = sh.minMemory, sh.tableBytes
}

// checkCommand returns why cm is not a WASI preview 1 command, or nil.
func checkCommand(cm wazero.CompiledModule) error {
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wasiModule {
			return fmt.Errorf("imports %s.%s, which WASI preview 1 does not provide", mod, name)
		}
	}
	if _, ok := cm.ExportedFunctions()["_start"]; !ok {
		return errors.New("exports no _start function: not a WASI command")
	}
	return nil
}

// openModule opens the module file at path and describes it.
func openModule(path string) (*os.File, os.FileInfo, *loadError) {
	f, err := os.Open(path)
	if err != nil {
		code := 126
		if errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		return nil, nil, &loadError{code, err.Error()}
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, nil, &loadError{126, err.Error()}
	case fi.IsDir():
		f.Close()
		return nil, nil, &loadError{126, "is a directory"}
	case fi.Size() > maxModuleSize:
		f.Close()
		return nil, nil, &loadError{126, fmt.Sprintf("%d bytes, over the %d-byte module limit", fi.Size(), maxModuleSize)}
	}
	return f, fi, nil
}

// readModule reads the module file f.
func readModule(f *os.File) ([]byte, *loadError) {
	b, err := io.ReadAll(io.LimitReader(f, maxModuleSize+1))
	if err != nil {
		return nil, &loadError{126, err.Error()}
	}
	if len(b) > maxModuleSize {
		return nil, &loadError{126, fmt.Sprintf("over the %d-byte module limit", maxModuleSize)}
	}
	return b, nil
}

func closedError(step string) *sandbox.Error {
	return &sandbox.Error{Kind: sandbox.ErrUnavailable, Backend: Backend, Step: step, Err: errClosed}
}
