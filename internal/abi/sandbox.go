package abi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
	"github.com/initorigin/io-harness-go/pkg/sandbox/wasi"
)

// backendsOf lists the sandbox backends of an operating system, strongest
// first, then host and wasi, which are never chosen automatically: host
// protects nothing, and wasi runs WebAssembly modules only.
func backendsOf(goos string) []string {
	var native []string
	switch goos {
	case "linux":
		native = []string{sandbox.BackendLinuxNS, sandbox.BackendLinuxLandlock, sandbox.BackendBwrap, sandbox.BackendFloor}
	case "darwin":
		native = []string{sandbox.BackendSeatbelt, sandbox.BackendFloor}
	case "windows":
		native = []string{sandbox.BackendWindowsJob}
	}
	return append(native, sandbox.BackendHost, sandbox.BackendWASI)
}

// openSandbox opens the sandbox that runs spec: the wasi backend when
// backend names it, or names none and the program is a .wasm module (as
// the harness routes its commands); else sandbox.New's choice. The caller
// closes what it returns when that is an io.Closer.
func openSandbox(ctx context.Context, backend, helper string, spec *sandbox.Spec) (sandbox.Sandbox, error) {
	if backend == sandbox.BackendWASI || backend == "" && len(spec.Argv) > 0 && wasi.IsModule(spec.Argv[0]) {
		// With the on-disk cache of compiled modules a run's sandbox
		// uses: a module compiles once per machine, not per call.
		sb, err := wasi.New(ctx, &wasi.Options{CacheDir: wasi.UserCacheDir()})
		if err != nil {
			sb, err = wasi.New(ctx, nil) // a cache we cannot use is no reason not to run
		}
		return sb, err
	}
	return sandbox.New(ctx, &sandbox.Options{Backend: backend, HelperPath: helper})
}

// probe opens the backend name as sandbox.backends reports it.
func probe(ctx context.Context, name, helper string) (sandbox.Enforcement, error) {
	if name == sandbox.BackendWASI {
		sb, err := wasi.New(ctx, nil)
		if err != nil {
			return sandbox.Enforcement{}, err
		}
		defer sb.(io.Closer).Close()
		return sb.Enforcement(), nil
	}
	sb, err := sandbox.New(ctx, &sandbox.Options{Backend: name, HelperPath: helper})
	if err != nil {
		return sandbox.Enforcement{}, err
	}
	return sb.Enforcement(), nil
}

// BackendInfo is one entry of sandbox.backends.
type BackendInfo struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	// Enforcement is what the backend enforces here, measured by its
	// probe; absent when it is unavailable.
	Enforcement *sandbox.Enforcement `json:"enforcement,omitempty"`
	// Reason says why an unavailable backend does not work here.
	Reason string `json:"reason,omitempty"`
}

func (a *ABI) sandboxBackends(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		HelperPath string `json:"helper_path"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	var out []BackendInfo
	for _, name := range backendsOf(runtime.GOOS) {
		info := BackendInfo{Name: name}
		if e, err := probe(ctx, name, p.HelperPath); err != nil {
			info.Reason = err.Error()
		} else {
			info.Available, info.Enforcement = true, &e
		}
		out = append(out, info)
	}
	chosen := ""
	if sb, err := sandbox.New(ctx, &sandbox.Options{HelperPath: p.HelperPath}); err == nil {
		chosen = sb.Name()
	}
	return map[string]any{"os": runtime.GOOS, "default": chosen, "backends": out}, nil
}

func (a *ABI) sandboxExec(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Backend    string          `json:"backend"`
		HelperPath string          `json:"helper_path"`
		Spec       json.RawMessage `json:"spec"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if len(p.Spec) == 0 || string(p.Spec) == "null" {
		return nil, fmt.Errorf("%w: params.spec: required, such as {\"argv\": [\"echo\", \"hi\"]}", errInvalid)
	}
	var spec sandbox.Spec
	dec := json.NewDecoder(bytes.NewReader(p.Spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("%w: params.spec: %v", errInvalid, err)
	}
	sb, err := openSandbox(ctx, p.Backend, p.HelperPath, &spec)
	if err != nil {
		return nil, err
	}
	if c, ok := sb.(io.Closer); ok {
		defer c.Close()
	}
	res, err := sb.Run(ctx, &spec)
	if res != nil && err != nil {
		// The command ran but not all of its changes reached the host
		// (a full filesystem, a path it could not write): the error says
		// so, and its details keep the command's result.
		e := ErrorOf(err)
		e.detail("result", res)
		return nil, e
	}
	return res, err
}
