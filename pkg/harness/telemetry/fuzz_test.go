package telemetry

import (
	"context"
	"strings"
	"testing"
)

// FuzzPublish feeds an exporter arbitrary bytes as events: it must never
// panic, whatever a sink is handed, and must keep its spans consistent
// enough to shut down.
func FuzzPublish(f *testing.F) {
	for _, s := range []string{
		`{"run_id":"r","kind":"run_started","at":"2026-01-01T00:00:00Z"}`,
		`{"run_id":"r","kind":"step_started","step":1}`,
		`{"run_id":"r","kind":"model_done","step":1,"usage":{"input_tokens":5},"cost":{"usd":1,"known":true},"latency_ms":-5,"stop_reason":"end"}`,
		`{"run_id":"r","kind":"tool_call","call_id":"c","tool":"x"}`,
		`{"run_id":"r","kind":"policy","effect":"deny"}`,
		`{"run_id":"r","kind":"tool_result","call_id":"c","is_error":true}`,
		`{"run_id":"r","kind":"verification","checks":[{"duration":-1}],"passed":true}`,
		`{"run_id":"r","kind":"outcome"}`,
		`{"kind":"checkpoint"}`, `null`, `[]`, `{"kind":7}`,
	} {
		f.Add(s)
	}
	x, err := New(Config{Endpoint: "http://127.0.0.1:9", QueueSize: 8})
	if err != nil {
		f.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		x.Shutdown(ctx)
	}()
	f.Fuzz(func(t *testing.T, data string) {
		for _, line := range strings.Split(data, "\n") {
			x.Publish("r", []byte(line))
		}
	})
}

// FuzzResolve reads arbitrary environment values: a bad value is an error
// or ignored, never a panic.
func FuzzResolve(f *testing.F) {
	f.Add("http://c:4318", "grpc", "a=1,b=%zz,=x", "abc", "gzip")
	f.Add("c:4317", "http/protobuf", ",,,", "-5", "none")
	f.Fuzz(func(t *testing.T, endpoint, protocol, headers, timeout, compression string) {
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
			"OTEL_EXPORTER_OTLP_HEADERS": headers, "OTEL_EXPORTER_OTLP_TIMEOUT": timeout, "OTEL_EXPORTER_OTLP_COMPRESSION": compression,
			"OTEL_RESOURCE_ATTRIBUTES": headers}
		s, err := resolve(Config{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		if err == nil && s.timeout <= 0 {
			t.Errorf("timeout %v", s.timeout)
		}
	})
}
