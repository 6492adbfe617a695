package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// A SchemaError is where a document departs from a schema: the deepest
// place the validator found wrong, for a caller that names fields.
type SchemaError struct {
	// Path is the place, as the keys and indexes from the document's root;
	// a missing property's name is its last element.
	Path []string
	// Message says what is wrong there, with the value when it is a
	// short scalar.
	Message string
}

// Error implements error.
func (e *SchemaError) Error() string { return "/" + strings.Join(e.Path, "/") + ": " + e.Message }

// Locate validates a JSON document against the schema, as Check does, and
// returns its departure as a *SchemaError (nil when the document is
// valid); a document that is not JSON is another error.
func (s *Schema) Locate(doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	var ve *jsonschema.ValidationError
	if err := s.s.Validate(v); !errors.As(err, &ve) {
		return err
	}
	leaf := deepest(ve)
	loc := slices.Clone(leaf.InstanceLocation)
	if r, ok := leaf.ErrorKind.(*kind.Required); ok && len(r.Missing) > 0 {
		return &SchemaError{Path: append(loc, r.Missing[0]), Message: "required"}
	}
	msg := "does not match the schema"
	if leaf.ErrorKind != nil {
		msg = leaf.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	}
	if at, ok := valueAt(v, loc); ok {
		if b, err := json.Marshal(at); err == nil && len(b) <= 80 {
			msg = string(b) + ": " + msg
		}
	}
	return &SchemaError{Path: loc, Message: msg}
}

// deepest is the cause of a validation error deepest in the document: the
// value that is wrong rather than the object around it (the first such).
func deepest(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return ve
	}
	var best *jsonschema.ValidationError
	for _, c := range ve.Causes {
		if d := deepest(c); best == nil || len(d.InstanceLocation) > len(best.InstanceLocation) {
			best = d
		}
	}
	return best
}

// valueAt is the scalar at loc in a decoded document.
func valueAt(v any, loc []string) (any, bool) {
	for _, k := range loc {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	switch v.(type) {
	case map[string]any, []any:
		return nil, false
	}
	return v, true
}
