package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzFramer feeds arbitrary server output to the framer: it never
// panics, passes on only lines within the cap that parse as JSON, and
// answers a pending request at most once.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"), 64)
	f.Add([]byte("not json\n{\"jsonrpc\":\"2.0\",\"id\":1}\n"), 64)
	f.Add([]byte(strings.Repeat("x", 300)+"\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"}"), 64)
	f.Add([]byte("{\"result\":\""+strings.Repeat("y", 200)+"\",\"jsonrpc\":\"2.0\",\"id\":1}\r\n"), 32)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max < 16 || max > 4096 {
			max = 64
		}
		p := newPending()
		p.add("1", "tools/call")
		p.add(`"a"`, "tools/list")
		fr := &framer{max: max, pending: p}
		pr, pw := io.Pipe()
		go fr.run(bytes.NewReader(data), pw)
		out, err := io.ReadAll(pr)
		if err != nil {
			t.Fatalf("the framer's stream failed: %v", err)
		}
		answered := map[string]int{}
		for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if !json.Valid(line) {
				t.Fatalf("passed on a line that is not JSON: %q", line)
			}
			if len(line) > max && !bytes.Contains(line, []byte("io-harness: ")) {
				t.Fatalf("passed on a line of %d bytes over the cap of %d", len(line), max)
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method *string         `json:"method"`
			}
			json.Unmarshal(line, &m)
			if m.Method == nil && len(m.ID) > 0 {
				answered[string(m.ID)]++
			}
		}
		for id, n := range answered {
			if n > 1 {
				t.Fatalf("request %s answered %d times", id, n)
			}
		}
	})
}

// FuzzParseServers: any input is a valid list or a *ConfigError, never a
// panic.
func FuzzParseServers(f *testing.F) {
	f.Add([]byte(`[{"name":"a","command":["x"]}]`))
	f.Add([]byte(`[{"name":"b","url":"http://127.0.0.1:1/mcp","headers":{"A":"${T}"}}]`))
	f.Add([]byte(`[{"name":"a__b","command":["x"],"bogus":1}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseServers(data)
		var ce *ConfigError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("not a *ConfigError: %v", err)
		}
		if err == nil {
			if err := Validate(s); err != nil {
				t.Fatalf("parsed, then invalid: %v", err)
			}
		}
	})
}
