// Command typegen generates the bindings' types from the one JSON Schema
// of the run spec, the events and the results (docs/spec.schema.json):
// bindings/node/types.d.ts (TypeScript declarations) and
// bindings/python/io_harness/types.py (TypedDicts). Run it from the
// module root:
//
//	go run ./internal/typegen          # write both files
//	go run ./internal/typegen -check   # fail when either is stale
//
// It understands the subset of JSON Schema the schema uses: objects with
// properties, required and additionalProperties; arrays; string, integer,
// number, boolean and null; enum and const; $ref; oneOf and anyOf. Every
// object with properties must be a definition, so that it has a name; an
// unknown keyword is an error, so that the schema cannot drift past what
// the types can say.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Outputs, relative to the module root.
const (
	schemaFile = "docs/spec.schema.json"
	tsFile     = "bindings/node/types.d.ts"
	pyFile     = "bindings/python/io_harness/types.py"
)

func main() {
	check := flag.Bool("check", false, "report stale files instead of writing them")
	root := flag.String("root", ".", "the module root")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "typegen:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	data, err := os.ReadFile(filepath.Join(root, schemaFile))
	if err != nil {
		return err
	}
	files, err := Generate(data)
	if err != nil {
		return err
	}
	var stale []string
	for _, name := range []string{tsFile, pyFile} {
		path := filepath.Join(root, name)
		if check {
			old, _ := os.ReadFile(path)
			if !bytes.Equal(old, files[name]) {
				stale = append(stale, name)
			}
			continue
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("%s out of date with %s: run go run ./internal/typegen", strings.Join(stale, " and "), schemaFile)
	}
	return nil
}

// schema is one JSON Schema node of the subset typegen understands.
type schema struct {
	Description          string             `json:"description"`
	Type                 json.RawMessage    `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	Enum                 []any              `json:"enum"`
	Const                any                `json:"const"`
	Ref                  string             `json:"$ref"`
	OneOf                []*schema          `json:"oneOf"`
	AnyOf                []*schema          `json:"anyOf"`

	order []string // the properties in document order
}

// known are the keywords typegen reads or may ignore (they constrain
// values, not types).
var known = map[string]bool{
	"description": true, "type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "$ref": true, "oneOf": true, "anyOf": true,
	"minimum": true, "maximum": true, "minItems": true, "pattern": true, "format": true,
	"$schema": true, "$id": true, "title": true, "$defs": true,
}

func (s *schema) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	for k := range keys {
		if !known[k] {
			return fmt.Errorf("keyword %q is not one typegen understands", k)
		}
	}
	type plain schema
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	if raw, ok := keys["properties"]; ok {
		order, err := objectKeys(raw)
		if err != nil {
			return err
		}
		s.order = order
	}
	return nil
}

// objectKeys returns the keys of a JSON object in document order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// types returns the node's "type" as a list.
func (s *schema) types() []string {
	if len(s.Type) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return []string{one}
	}
	var many []string
	json.Unmarshal(s.Type, &many)
	return many
}

func (s *schema) isRecord() bool { return len(s.Properties) > 0 }

// doc is the schema document: its definitions in document order.
type doc struct {
	Defs  map[string]*schema `json:"$defs"`
	order []string
}

func parse(data []byte) (*doc, error) {
	var d doc
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	json.Unmarshal(data, &top)
	order, err := objectKeys(top["$defs"])
	if err != nil {
		return nil, err
	}
	d.order = order
	// Every record is a definition.
	var walk func(where string, s *schema, def bool) error
	walk = func(where string, s *schema, def bool) error {
		if s == nil {
			return nil
		}
		if s.isRecord() && !def {
			return fmt.Errorf("%s: an object with properties must be a $defs entry of its own", where)
		}
		for _, k := range s.order {
			if err := walk(where+"."+k, s.Properties[k], false); err != nil {
				return err
			}
		}
		if err := walk(where+"[]", s.Items, false); err != nil {
			return err
		}
		for i, o := range append(append([]*schema{}, s.OneOf...), s.AnyOf...) {
			if err := walk(fmt.Sprintf("%s|%d", where, i), o, false); err != nil {
				return err
			}
		}
		if s.Ref != "" && d.Defs[strings.TrimPrefix(s.Ref, "#/$defs/")] == nil {
			return fmt.Errorf("%s: $ref %s names no definition", where, s.Ref)
		}
		return nil
	}
	for _, name := range d.order {
		if err := walk(name, d.Defs[name], true); err != nil {
			return nil, err
		}
	}
	return &d, nil
}

// Generate returns the generated files by their paths.
func Generate(data []byte) (map[string][]byte, error) {
	d, err := parse(data)
	if err != nil {
		return nil, err
	}
	ts, err := genTS(d)
	if err != nil {
		return nil, err
	}
	py, err := genPy(d)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{tsFile: ts, pyFile: py}, nil
}

const header = "Generated by go run ./internal/typegen from docs/spec.schema.json. DO NOT EDIT."

// -- TypeScript ----------------------------------------------------------

func genTS(d *doc) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n//\n// The run spec, the events and the results of io-harness (docs/spec.md,\n// docs/abi.md), as TypeScript declarations.\n", header)
	for _, name := range d.order {
		s := d.Defs[name]
		b.WriteString("\n")
		tsDoc(&b, "", s.Description)
		if s.isRecord() {
			fmt.Fprintf(&b, "export interface %s {\n", name)
			req := set(s.Required)
			for _, k := range s.order {
				p := s.Properties[k]
				t, err := tsType(p)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", name, k, err)
				}
				tsDoc(&b, "  ", p.Description)
				opt := "?"
				if req[k] {
					opt = ""
				}
				fmt.Fprintf(&b, "  %s%s: %s;\n", tsKey(k), opt, t)
			}
			if string(s.AdditionalProperties) != "false" && len(s.AdditionalProperties) == 0 {
				b.WriteString("  /** Fields added in later versions. */\n  [field: string]: unknown;\n")
			}
			b.WriteString("}\n")
			continue
		}
		t, err := tsType(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(&b, "export type %s = %s;\n", name, t)
	}
	return b.Bytes(), nil
}

func tsKey(k string) string {
	for _, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return strconv.Quote(k)
		}
	}
	return k
}

func tsDoc(b *bytes.Buffer, indent, text string) {
	if text == "" {
		return
	}
	fmt.Fprintf(b, "%s/** %s */\n", indent, strings.ReplaceAll(text, "*/", "*\\/"))
}

func tsType(s *schema) (string, error) {
	switch {
	case s.Ref != "":
		return strings.TrimPrefix(s.Ref, "#/$defs/"), nil
	case s.Const != nil:
		return tsLiteral(s.Const)
	case len(s.Enum) > 0:
		var parts []string
		for _, v := range s.Enum {
			l, err := tsLiteral(v)
			if err != nil {
				return "", err
			}
			parts = append(parts, l)
		}
		return strings.Join(parts, " | "), nil
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		var parts []string
		for _, o := range append(append([]*schema{}, s.OneOf...), s.AnyOf...) {
			t, err := tsType(o)
			if err != nil {
				return "", err
			}
			parts = append(parts, t)
		}
		return strings.Join(parts, " | "), nil
	}
	ts := s.types()
	if len(ts) == 0 {
		return "unknown", nil
	}
	var parts []string
	for _, t := range ts {
		switch t {
		case "string":
			parts = append(parts, "string")
		case "integer", "number":
			parts = append(parts, "number")
		case "boolean":
			parts = append(parts, "boolean")
		case "null":
			parts = append(parts, "null")
		case "array":
			item := "unknown"
			if s.Items != nil {
				it, err := tsType(s.Items)
				if err != nil {
					return "", err
				}
				item = it
			}
			if strings.ContainsAny(item, " |") {
				item = "(" + item + ")"
			}
			parts = append(parts, item+"[]")
		case "object":
			v := "unknown"
			if len(s.AdditionalProperties) > 0 && s.AdditionalProperties[0] == '{' {
				var ap schema
				if err := json.Unmarshal(s.AdditionalProperties, &ap); err != nil {
					return "", err
				}
				t, err := tsType(&ap)
				if err != nil {
					return "", err
				}
				v = t
			}
			parts = append(parts, "Record<string, "+v+">")
		default:
			return "", fmt.Errorf("type %q", t)
		}
	}
	return strings.Join(parts, " | "), nil
}

func tsLiteral(v any) (string, error) {
	switch v := v.(type) {
	case string:
		b, _ := json.Marshal(v)
		return "'" + strings.ReplaceAll(strings.Trim(string(b), `"`), "'", "\\'") + "'", nil
	case float64, bool:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("literal %v", v)
}

// -- Python ----------------------------------------------------------------

func genPy(d *doc) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n", header)
	b.WriteString(`"""The run spec, the events and the results of io-harness (docs/spec.md,
docs/abi.md), as TypedDicts a type checker understands.

A spec is a :class:` + "`Spec`" + `; an event is an :data:` + "`Event`" + ` (narrow it on
its "kind"); a run's result is a :class:` + "`DoneEvent`" + ` with an :class:` + "`Outcome`" + `.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, TypedDict, Union
`)
	// Definitions in document order; names are strings so that order
	// and recursion do not matter.
	var all []string
	for _, name := range d.order {
		s := d.Defs[name]
		all = append(all, name)
		b.WriteString("\n")
		if s.isRecord() {
			req := set(s.Required)
			var reqs, opts []string
			for _, k := range s.order {
				t, err := pyType(s.Properties[k])
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", name, k, err)
				}
				entry := fmt.Sprintf("        %q: %s,\n", k, t)
				if req[k] {
					reqs = append(reqs, entry)
				} else {
					opts = append(opts, entry)
				}
			}
			// Required keys in one TypedDict, optional ones in another
			// (total=False); the class joins them (Python 3.9 has no
			// NotRequired).
			bases := []string{}
			if len(reqs) > 0 {
				fmt.Fprintf(&b, "_%sRequired = TypedDict(\n    \"_%sRequired\",\n    {\n%s    },\n)\n", name, name, strings.Join(reqs, ""))
				bases = append(bases, "_"+name+"Required")
			}
			if len(opts) > 0 {
				fmt.Fprintf(&b, "_%sOptional = TypedDict(\n    \"_%sOptional\",\n    {\n%s    },\n    total=False,\n)\n", name, name, strings.Join(opts, ""))
				bases = append(bases, "_"+name+"Optional")
			}
			fmt.Fprintf(&b, "\n\nclass %s(%s):\n", name, strings.Join(bases, ", "))
			fmt.Fprintf(&b, "    %s\n", pyDocstring(s.Description))
			continue
		}
		t, err := pyType(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(&b, "%s = %s\n", name, t)
		if s.Description != "" {
			fmt.Fprintf(&b, "%s\n", pyComment(s.Description))
		}
	}
	sort.Strings(all)
	b.WriteString("\n__all__ = [\n")
	for _, n := range all {
		fmt.Fprintf(&b, "    %q,\n", n)
	}
	b.WriteString("]\n")
	return b.Bytes(), nil
}

func pyDocstring(text string) string {
	if text == "" {
		text = "A record of the schema."
	}
	return `"""` + strings.ReplaceAll(text, `"""`, `'''`) + `"""`
}

func pyComment(text string) string {
	return "# " + strings.ReplaceAll(text, "\n", "\n# ")
}

func pyType(s *schema) (string, error) {
	switch {
	case s.Ref != "":
		return strconv.Quote(strings.TrimPrefix(s.Ref, "#/$defs/")), nil
	case s.Const != nil:
		return pyLiteral([]any{s.Const})
	case len(s.Enum) > 0:
		return pyLiteral(s.Enum)
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		var parts []string
		for _, o := range append(append([]*schema{}, s.OneOf...), s.AnyOf...) {
			t, err := pyType(o)
			if err != nil {
				return "", err
			}
			parts = append(parts, t)
		}
		return "Union[" + strings.Join(parts, ", ") + "]", nil
	}
	ts := s.types()
	if len(ts) == 0 {
		return "Any", nil
	}
	var parts []string
	for _, t := range ts {
		switch t {
		case "string":
			parts = append(parts, "str")
		case "integer":
			parts = append(parts, "int")
		case "number":
			parts = append(parts, "float")
		case "boolean":
			parts = append(parts, "bool")
		case "null":
			parts = append(parts, "None")
		case "array":
			item := "Any"
			if s.Items != nil {
				it, err := pyType(s.Items)
				if err != nil {
					return "", err
				}
				item = it
			}
			parts = append(parts, "List["+item+"]")
		case "object":
			v := "Any"
			if len(s.AdditionalProperties) > 0 && s.AdditionalProperties[0] == '{' {
				var ap schema
				if err := json.Unmarshal(s.AdditionalProperties, &ap); err != nil {
					return "", err
				}
				t, err := pyType(&ap)
				if err != nil {
					return "", err
				}
				v = t
			}
			parts = append(parts, "Dict[str, "+v+"]")
		default:
			return "", fmt.Errorf("type %q", t)
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return "Union[" + strings.Join(parts, ", ") + "]", nil
}

func pyLiteral(vals []any) (string, error) {
	var parts []string
	for _, v := range vals {
		switch v := v.(type) {
		case string:
			parts = append(parts, strconv.Quote(v))
		case bool:
			parts = append(parts, map[bool]string{true: "True", false: "False"}[v])
		case float64:
			parts = append(parts, fmt.Sprint(v))
		default:
			return "", errors.New("a literal typegen cannot write")
		}
	}
	return "Literal[" + strings.Join(parts, ", ") + "]", nil
}

func set(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}
