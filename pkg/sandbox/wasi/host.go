package wasi

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// defaultFDBudget is the host descriptors a Sandbox's guests may hold
// where the process's limit is unknown or unlimited.
const defaultFDBudget = 1 << 14

// runKey is the context key of the run a guest call belongs to.
type runKey struct{}

// runOf returns the run whose guest made the call ctx belongs to, or nil.
func runOf(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// instantiateWASI instantiates the WASI preview 1 host module in rt:
// wazero's, with one change. A path_open that the open-file caps refused
// returns EMFILE (the run's cap) or ENFILE (the Sandbox's budget), as an
// open past RLIMIT_NOFILE does natively: wazero's file system interface
// cannot express either, so rootFS.OpenFile records the refusal and
// path_open's result is replaced after wazero's own path_open returns.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(wasiModule)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	// Compiled once to reach wazero's own path_open.
	cm, err := b.Compile(ctx)
	if err != nil {
		return err
	}
	defer cm.Close(ctx)
	def, ok := cm.ExportedFunctions()["path_open"]
	if !ok {
		return fmt.Errorf("wazero's WASI module has no path_open")
	}
	open, ok := def.GoFunction().(api.GoModuleFunction)
	if !ok {
		return fmt.Errorf("wazero's path_open is a %T, not a Go module function", def.GoFunction())
	}
	pathOpen := api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		r := runOf(ctx)
		if r != nil {
			r.files.takeRefusal() // one left by an open outside path_open
		}
		open.Call(ctx, mod, stack)
		if r != nil {
			if e := r.files.takeRefusal(); e != 0 {
				stack[0] = uint64(e)
			}
		}
	})
	b.NewFunctionBuilder().
		WithGoModuleFunction(pathOpen, def.ParamTypes(), def.ResultTypes()).
		WithParameterNames(def.ParamNames()...).
		WithResultNames(def.ResultNames()...).
		Export("path_open")
	_, err = b.Instantiate(ctx)
	return err
}
