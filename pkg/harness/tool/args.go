package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// argError is an argument the model got wrong. Field names the JSON field,
// or is empty when the arguments as a whole are wrong.
type argError struct {
	Field string
	Msg   string
}

func (e *argError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Msg)
}

// badArgs returns the observation for a bad argument.
func badArgs(err error) Result {
	return errorf("invalid arguments: %v", err)
}

// decodeArgs decodes the JSON arguments raw into the struct *dst, strictly:
// the arguments must be one JSON object, every key must name a field of dst
// exactly (as its json tag spells it), every name in required must be
// present and not null, and every value must have its field's type. Null or
// empty arguments mean {}. The error, an *argError, names the field and
// what was expected.
func decodeArgs(raw json.RawMessage, dst any, required ...string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	fields := jsonFields(reflect.TypeOf(dst).Elem())

	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return &argError{Msg: fmt.Sprintf("the arguments are not valid JSON: %v (at byte %d); send one JSON object", syn, syn.Offset)}
		case errors.As(err, &typ):
			return &argError{Msg: fmt.Sprintf("the arguments must be a JSON object, got %s", typ.Value)}
		default:
			return &argError{Msg: fmt.Sprintf("the arguments could not be decoded: %v", err)}
		}
	}
	if obj == nil { // the JSON was null inside whitespace the trim kept
		obj = map[string]json.RawMessage{}
	}

	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := fields[k]; !ok {
			return &argError{Field: k, Msg: "unknown field; the allowed fields are " + fieldList(fields)}
		}
	}
	for _, k := range required {
		if v, ok := obj[k]; !ok || string(bytes.TrimSpace(v)) == "null" {
			return &argError{Field: k, Msg: "missing required field, expected " + describeType(fields[k])}
		}
	}

	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			name, _, _ := strings.Cut(typ.Field, ".")
			t, ok := fields[name]
			if !ok {
				t = typ.Type
			}
			return &argError{Field: typ.Field, Msg: fmt.Sprintf("expected %s, got %s", describeType(t), typ.Value)}
		}
		return &argError{Msg: fmt.Sprintf("the arguments could not be decoded: %v", err)}
	}
	return nil
}

// jsonFields maps the JSON name of every field of the struct type t to the
// field's type.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		m[name] = f.Type
	}
	return m
}

// fieldList returns the sorted field names of m, comma-separated.
func fieldList(m map[string]reflect.Type) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// describeType names a Go field type in JSON terms, for an error message.
func describeType(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(describeType(t.Elem()), "a "), "an ") + "s"
	default:
		return "a JSON " + t.Kind().String()
	}
}
