package abi

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/telemetry"
)

// shutdownTelemetry bounds what closing a harness waits for spans still
// queued for a collector that does not answer.
const shutdownTelemetry = 3 * time.Second

// telemetrySink returns the OpenTelemetry exporter of a spec's telemetry
// settings, or nil when export is off: disabled in the spec, or no
// collector named by the spec or (when the harness reads it) the
// environment. Runs with the same settings share one exporter, which
// lives until the harness closes.
func (h *harnessEntry) telemetrySink(t *harness.TelemetrySpec) (harness.Sink, error) {
	if t != nil && t.Disabled || t == nil && h.lookup == nil {
		return nil, nil
	}
	key, _ := json.Marshal(t)
	h.expMu.Lock()
	defer h.expMu.Unlock()
	if x, ok := h.exporters[string(key)]; ok {
		if x == nil {
			return nil, nil
		}
		return x, nil
	}
	cfg := telemetry.Config{LookupEnv: h.lookup, Parent: telemetry.ParentFrom(h.st)}
	if t != nil {
		cfg.Endpoint, cfg.Protocol, cfg.Headers, cfg.Content = t.Endpoint, t.Protocol, t.Headers, t.Content
		cfg.Timeout, cfg.ServiceName = time.Duration(t.Timeout), t.ServiceName
	}
	x, err := telemetry.New(cfg)
	switch {
	case errors.Is(err, telemetry.ErrDisabled):
		h.exporters[string(key)] = nil
		return nil, nil
	case err != nil:
		return nil, &harness.Error{Kind: harness.ErrConfig, Field: "spec.telemetry", Err: err}
	}
	h.exporters[string(key)] = x
	return x, nil
}

// closeTelemetry exports what the harness's exporters still hold, for at
// most shutdownTelemetry, and stops them.
func (h *harnessEntry) closeTelemetry() {
	h.expMu.Lock()
	all := h.exporters
	h.exporters = map[string]*telemetry.Exporter{}
	h.expMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTelemetry)
	defer cancel()
	for _, x := range all {
		if x != nil {
			x.Shutdown(ctx)
		}
	}
}

// addTelemetry adds the spec's exporter, if export is on, to opts's sinks.
func (h *harnessEntry) addTelemetry(opts *harness.Options, t *harness.TelemetrySpec) error {
	sink, err := h.telemetrySink(t)
	if err != nil || sink == nil {
		return err
	}
	opts.Sinks = append(opts.Sinks, sink)
	return nil
}
