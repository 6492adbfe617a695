// Package docs carries the one document of docs/ that code reads: the JSON
// Schema of the run spec, the events and the results (spec.schema.json),
// which ParseSpec validates every spec against.
package docs

import _ "embed" // the schema

//go:embed spec.schema.json
var schema string

// Schema returns docs/spec.schema.json.
func Schema() string { return schema }
