package tool

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeArgs(t *testing.T) {
	type args struct {
		Path  string   `json:"path"`
		Count *int     `json:"count"`
		Flag  bool     `json:"flag"`
		List  []string `json:"list"`
	}
	three := 3
	tests := []struct {
		name string
		raw  string
		want args
		err  string // a part of the error; "" for none
	}{
		{name: "empty", raw: "", want: args{}},
		{name: "whitespace", raw: " \n", want: args{}},
		{name: "null", raw: "null", want: args{}, err: `field "path": missing required field, expected a string`},
		{name: "full", raw: `{"path": "a", "count": 3, "flag": true, "list": ["x"]}`, want: args{Path: "a", Count: &three, Flag: true, List: []string{"x"}}},
		{name: "null optional", raw: `{"path": "a", "count": null}`, want: args{Path: "a"}},
		{name: "invalid JSON", raw: `{"path": "a"`, err: "the arguments are not valid JSON"},
		{name: "trailing data", raw: `{"path": "a"} {}`, err: "the arguments are not valid JSON"},
		{name: "array", raw: `["a"]`, err: "the arguments must be a JSON object, got array"},
		{name: "string", raw: `"a"`, err: "the arguments must be a JSON object, got string"},
		{name: "unknown field", raw: `{"path": "a", "colour": 1}`, err: `field "colour": unknown field; the allowed fields are count, flag, list, path`},
		{name: "wrong case", raw: `{"Path": "a"}`, err: `field "Path": unknown field`},
		{name: "missing required", raw: `{"count": 1}`, err: `field "path": missing required field, expected a string`},
		{name: "null required", raw: `{"path": null}`, err: `field "path": missing required field`},
		{name: "wrong type", raw: `{"path": "a", "count": "3"}`, err: `field "count": expected an integer, got string`},
		{name: "float for int", raw: `{"path": "a", "count": 2.5}`, err: `field "count": expected an integer, got number 2.5`},
		{name: "bool as string", raw: `{"path": "a", "flag": "true"}`, err: `field "flag": expected a boolean (true or false), got string`},
		{name: "list of numbers", raw: `{"path": "a", "list": [1]}`, err: `expected an array of strings, got number`},
		{name: "list as string", raw: `{"path": "a", "list": "x"}`, err: `field "list": expected an array of strings, got string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got args
			err := decodeArgs(json.RawMessage(tt.raw), &got, "path")
			if tt.name == "empty" || tt.name == "whitespace" {
				// No arguments at all is {}: the required path is missing.
				if err == nil || !strings.Contains(err.Error(), `"path"`) {
					t.Fatalf("err = %v, want a missing path", err)
				}
				return
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestBound(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n"
	tests := []struct {
		name string
		in   string
	}{
		{"lines", strings.Repeat(line, 1000)},
		{"one long line", strings.Repeat("é", 40000)},
		{"just over", strings.Repeat("y", maxOutput+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bound(tt.in)
			if len(got) > maxOutput {
				t.Fatalf("len %d > %d", len(got), maxOutput)
			}
			i := strings.LastIndex(got, "[output truncated: ")
			if i < 0 {
				t.Fatalf("no marker in %q", got[len(got)-200:])
			}
			kept := got[:i]
			if !strings.HasPrefix(tt.in, kept) {
				kept = strings.TrimSuffix(kept, "\n") // the newline before the marker
			}
			if !strings.HasPrefix(tt.in, kept) {
				t.Fatalf("the kept part is not a prefix of the input")
			}
			var n, lines int
			if _, err := fmt.Sscanf(got[i:], "[output truncated: %d bytes in %d lines dropped", &n, &lines); err != nil {
				t.Fatal(err)
			}
			dropped := tt.in[len(kept):]
			if n != len(dropped) || lines != countLines([]byte(dropped)) {
				t.Errorf("marker says %d bytes in %d lines dropped; %d bytes in %d lines were", n, lines, len(dropped), countLines([]byte(dropped)))
			}
		})
	}
	if s := strings.Repeat("z", maxOutput); bound(s) != s {
		t.Errorf("a string at the limit was changed")
	}
}

// TestToolOutputBound checks that an observation too long for the bound,
// here a refusal that echoes a huge path, is cut with its marker.
func TestToolOutputBound(t *testing.T) {
	_, env := newEnv(t, nil)
	huge := "/" + strings.Repeat("x", 40000)
	for name, args := range map[string]obj{
		"read_file": {"path": huge}, "list_dir": {"path": huge},
		"grep": {"path": huge, "pattern": "x"}, "find": {"path": huge, "pattern": "x"},
	} {
		r := call(t, env, name, args)
		if !r.IsError || r.Refusal != reasonAbsolute || len(r.Output) > maxOutput ||
			!strings.Contains(r.Output, "[output truncated: ") {
			t.Errorf("%s: got refusal %q, %d bytes, ending %q", name, r.Refusal, len(r.Output), r.Output[max(0, len(r.Output)-120):])
		}
	}
}
