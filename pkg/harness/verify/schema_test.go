package verify

import (
	"strings"
	"testing"
)

func TestCompileSchema(t *testing.T) {
	s, err := CompileSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc  string
		want string // "" means valid
	}{
		{`{"a":1}`, ""},
		{`{"a":"x"}`, "at '/a': got string, want integer"},
		{`{"b":1}`, "missing property 'a'"},
		{`{"a":1`, "not valid JSON"},
	} {
		err := s.Check([]byte(tc.doc))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.doc, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "file://"):
			t.Errorf("%s: the error names a file: %v", tc.doc, err)
		}
	}
	for _, bad := range []string{`{"$ref":"http://example.com/s.json"}`, `{"type":"wat"}`, `{`} {
		if _, err := CompileSchema([]byte(bad)); err == nil {
			t.Errorf("%s compiled", bad)
		}
	}
}
