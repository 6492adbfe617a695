package abi

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// sideEffects are the methods the fuzzer decodes but does not run: they
// would create files at fuzzed paths, read files at fuzzed paths, run
// fuzzed commands, or start runs.
var sideEffects = []string{"harness.open", "sandbox.exec", "sandbox.backends", "run.start", "run.resume",
	"run.resume_with_decision", "debug.emit", "models.list"}

// FuzzCall feeds any bytes to the JSON method decoder and the method
// table: it never panics, and always answers one well-formed envelope
// whose error code is in the table and whose id is the request's.
func FuzzCall(f *testing.F) {
	for _, seed := range []string{
		`{"method":"version"}`,
		`{"method":"version","id":1,"abi":1}`,
		`{"method":"policy.explain","params":{"policy":"default","act":"read","target":".env"}}`,
		`{"method":"policy.explain","params":{"policy":{"version":1,"defaults":{"read":"ask"}},"act":"write","target":"a"}}`,
		`{"method":"approval.resolve","params":{"harness":1,"run_id":"r","request_id":"q","decision":{"kind":"approve"}}}`,
		`{"method":"run.cancel","params":{"run":18446744073709551615}}`,
		`{"method":"trace.get","params":{"harness":1,"run_id":"x","format":"text"},"id":"z"}`,
		`{"method":"harness.close","params":{"harness":1,"timeout_ms":-5}}`,
		`{"method":"run.status","params":{"run":1.5}}`,
		`{"method":"debug.stats","id":null}`,
		`{"method":["x"]}`, `{"id":{}}`, `[]`, `"str"`, `{`, ``, `{"method":"\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	a := New(nil)
	h := a.openHarness(mustMemoryStore(f), 8, nil)
	f.Cleanup(func() { a.Close(h.id, 5*time.Second) })
	f.Fuzz(func(t *testing.T, data []byte) {
		var probe struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(data, &probe) == nil && slices.Contains(sideEffects, probe.Method) {
			// Still exercise the decoder on it.
			if _, err := decodeRequest(data); err != nil && !slices.Contains(Codes(), err.Code) {
				t.Fatalf("decodeRequest code %q", err.Code)
			}
			return
		}
		out := a.Call(context.Background(), data)
		var env struct {
			OK     *bool           `json:"ok"`
			Result json.RawMessage `json:"result"`
			Error  *Error          `json:"error"`
			ID     json.RawMessage `json:"id"`
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&env); err != nil || dec.More() {
			t.Fatalf("malformed envelope for %q: %s (%v)", data, out, err)
		}
		if env.OK == nil || *env.OK == (env.Error != nil) {
			t.Fatalf("ok and error disagree for %q: %s", data, out)
		}
		if env.Error != nil {
			if !slices.Contains(Codes(), env.Error.Code) {
				t.Fatalf("unknown code %q for %q", env.Error.Code, data)
			}
			if env.Error.Message == "" {
				t.Fatalf("empty message for %q: %s", data, out)
			}
		}
		if req, err := decodeRequest(data); err == nil && len(req.ID) > 0 && string(req.ID) != "null" {
			if !jsonEqual(req.ID, env.ID) {
				t.Fatalf("id %s echoed as %s", req.ID, env.ID)
			}
		}
	})
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
