package tool

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSpecs(t *testing.T) {
	argTypes := map[string]any{
		"read_file": readArgs{}, "write_file": writeArgs{}, "edit_file": editArgs{},
		"list_dir": listArgs{}, "grep": grepArgs{}, "find": findArgs{}, "exec": execArgs{},
	}
	check := func(t *testing.T, tools []Tool, names []string, pathRequired bool) {
		var got []string
		for _, tl := range tools {
			spec := tl.Spec()
			got = append(got, spec.Name)
			t.Run(spec.Name, func(t *testing.T) {
				if len(spec.Description) < 40 {
					t.Errorf("description too short: %q", spec.Description)
				}
				var schema struct {
					Type                 string                     `json:"type"`
					Properties           map[string]json.RawMessage `json:"properties"`
					Required             []string                   `json:"required"`
					AdditionalProperties *bool                      `json:"additionalProperties"`
				}
				dec := json.NewDecoder(bytes.NewReader(spec.Parameters))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&schema); err != nil {
					t.Fatalf("schema: %v\n%s", err, spec.Parameters)
				}
				if schema.Type != "object" || schema.AdditionalProperties == nil || *schema.AdditionalProperties || schema.Required == nil {
					t.Errorf("schema must be a closed object with a required list: %s", spec.Parameters)
				}
				var props []string
				for k, v := range schema.Properties {
					props = append(props, k)
					var p map[string]any
					if err := json.Unmarshal(v, &p); err != nil || p["type"] == nil || p["description"] == nil {
						t.Errorf("property %s needs a type and a description: %s", k, v)
					}
				}
				slices.Sort(props)
				var fields []string
				for k := range jsonFields(reflect.TypeOf(argTypes[spec.Name])) {
					fields = append(fields, k)
				}
				slices.Sort(fields)
				if diff := cmp.Diff(fields, props); diff != "" {
					t.Errorf("schema properties differ from the argument fields (-fields +schema):\n%s", diff)
				}
				for _, r := range schema.Required {
					if _, ok := schema.Properties[r]; !ok {
						t.Errorf("required %q is not a property", r)
					}
				}
				_, hasPath := schema.Properties["path"]
				if hasPath && slices.Contains(schema.Required, "path") != (pathRequired && slices.Contains([]string{"read_file", "write_file", "edit_file"}, spec.Name)) {
					t.Errorf("path required = %v, want %v", slices.Contains(schema.Required, "path"), pathRequired)
				}
			})
		}
		if diff := cmp.Diff(names, got); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
	}
	t.Run("Workspace", func(t *testing.T) {
		check(t, Workspace(), []string{"read_file", "write_file", "edit_file", "list_dir", "grep", "find", "exec"}, true)
	})
	t.Run("SingleFile", func(t *testing.T) {
		check(t, SingleFile(), []string{"read_file", "write_file", "edit_file"}, false)
	})
}

// Every tool the harness builds in is reserved, and nothing else is: the
// reserved set is derived from the tools, so a new built-in cannot be
// forgotten.
func TestIsBuiltinFollowsTheTools(t *testing.T) {
	names := map[string]bool{}
	for _, tl := range append(Workspace(), SingleFile()...) {
		names[tl.Spec().Name] = true
	}
	if len(names) < 7 {
		t.Fatalf("only %d built-in names", len(names))
	}
	for name := range names {
		if !IsBuiltin(name) {
			t.Errorf("built-in %s is not reserved", name)
		}
	}
	for _, name := range []string{"mcp__fs__read_file", "read", "Read_file", "exec2", ""} {
		if IsBuiltin(name) {
			t.Errorf("%q is reserved", name)
		}
	}
}
