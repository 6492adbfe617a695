package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// firstProblem finds the first value of a JSON document, in document
// order, that decoding it into a value of type t refuses: an unknown
// field, a value of the wrong JSON type, or a value a type's own
// UnmarshalJSON refuses (a mistyped duration). It returns the value's
// JSON path ("task.budgets.max_step", "fallbacks[0].modle") and what is
// wrong with it, or "" for both when it finds nothing, or when data is
// not JSON at all.
//
// encoding/json names an unknown field without its path, a type error
// without its array indices, and a failed UnmarshalJSON not at all; this
// walk is what lets every spec error name its field.
func firstProblem(data []byte, t reflect.Type) (field, problem string) {
	return walk(bytes.TrimSpace(data), t, "")
}

func walk(raw []byte, t reflect.Type, path string) (field, problem string) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", ""
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			return orTop(path), err.Error()
		}
		return "", ""
	}
	switch t.Kind() {
	case reflect.Struct:
		return walkObject(raw, path, func(key string) (reflect.Type, bool) { return structField(t, key) })
	case reflect.Map:
		return walkObject(raw, path, func(string) (reflect.Type, bool) { return t.Elem(), true })
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() != reflect.Uint8 { // a []byte is a base64 string
			return walkArray(raw, t.Elem(), path)
		}
	case reflect.Interface:
		return "", ""
	}
	if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
		return orTop(path), leafProblem(err)
	}
	return "", ""
}

// walkObject walks the members of a JSON object; typeOf gives a key's
// type, or false when the key is not a field.
func walkObject(raw []byte, path string, typeOf func(string) (reflect.Type, bool)) (field, problem string) {
	if raw[0] != '{' {
		return orTop(path), "want a JSON object, got " + jsonKind(raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return "", ""
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", ""
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", ""
		}
		at := pathKey(key)
		if path != "" {
			at = path + "." + at
		}
		ft, ok := typeOf(key)
		if !ok {
			return at, "unknown field"
		}
		if f, p := walk(bytes.TrimSpace(v), ft, at); f != "" {
			return f, p
		}
	}
	return "", ""
}

// walkArray walks the elements of a JSON array.
func walkArray(raw []byte, elem reflect.Type, path string) (field, problem string) {
	if raw[0] != '[' {
		return orTop(path), "want a JSON array, got " + jsonKind(raw)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", ""
	}
	for i, it := range items {
		if f, p := walk(bytes.TrimSpace(it), elem, fmt.Sprintf("%s[%d]", path, i)); f != "" {
			return f, p
		}
	}
	return "", ""
}

// structField returns the type of the field of t that encoding/json
// decodes key into: by its JSON name, exactly or else ignoring case, and
// through embedded structs.
func structField(t reflect.Type, key string) (reflect.Type, bool) {
	var fold reflect.Type
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f.Type, true
		}
		if fold == nil && strings.EqualFold(name, key) {
			fold = f.Type
		}
	}
	return fold, fold != nil
}

// leafProblem describes why a scalar did not decode.
func leafProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("want %s, got JSON %s", te.Type, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the JSON type of a value.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// pathKey writes a key in a path: as it is, or quoted when it is empty or
// holds what would make the path ambiguous.
func pathKey(key string) string {
	if key == "" || strings.ContainsAny(key, ".[]\" ") || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) {
		return strconv.Quote(key)
	}
	return key
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}
