package abi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// backendsOf lists the sandbox backends of an operating system, strongest
// first, with host (never chosen automatically) last.
func backendsOf(goos string) []string {
	switch goos {
	case "linux":
		return []string{sandbox.BackendLinuxNS, sandbox.BackendLinuxLandlock, sandbox.BackendBwrap, sandbox.BackendFloor, sandbox.BackendHost}
	case "darwin":
		return []string{sandbox.BackendSeatbelt, sandbox.BackendFloor, sandbox.BackendHost}
	case "windows":
		return []string{sandbox.BackendWindowsJob, sandbox.BackendHost}
	}
	return []string{sandbox.BackendHost}
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
		sb, err := sandbox.New(ctx, &sandbox.Options{Backend: name, HelperPath: p.HelperPath})
		if err != nil {
			info.Reason = err.Error()
		} else {
			e := sb.Enforcement()
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
	sb, err := sandbox.New(ctx, &sandbox.Options{Backend: p.Backend, HelperPath: p.HelperPath})
	if err != nil {
		return nil, err
	}
	return sb.Run(ctx, &spec)
}
