package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/initorigin/io-harness-go/docs"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// checkSchema validates a spec against the one schema the project
// publishes (docs/spec.schema.json), so that every front door (ParseSpec:
// the Go API, the ABI and the CLI over it) refuses what the schema refuses,
// an enum's unknown value among it. withTask false is a resume's spec,
// whose task is optional. A departure is an *Error of kind ErrConfig
// naming the field by its JSON path.
func checkSchema(data []byte, withTask bool) error {
	compiled := specSchema
	if !withTask {
		compiled = resumeSchema
	}
	s, err := compiled()
	if err != nil {
		return err
	}
	err = s.Locate(data)
	var se *verify.SchemaError
	if errors.As(err, &se) {
		return configError(jsonPath(se.Path), "%s", se.Message)
	}
	if err != nil {
		return configError("", "%v", err)
	}
	return nil
}

// specSchema and resumeSchema compile the schema once, when first asked:
// it is read only, and a compile takes milliseconds.
var (
	specSchema   = sync.OnceValues(func() (*verify.Schema, error) { return compileSpecSchema(true) })
	resumeSchema = sync.OnceValues(func() (*verify.Schema, error) { return compileSpecSchema(false) })
)

// compileSpecSchema compiles docs/spec.schema.json; without the task, its
// Spec does not require one.
func compileSpecSchema(withTask bool) (*verify.Schema, error) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(docs.Schema()), &doc); err != nil {
		return nil, fmt.Errorf("harness: docs/spec.schema.json: %w", err)
	}
	if !withTask {
		spec := doc["$defs"].(map[string]any)["Spec"].(map[string]any)
		req, _ := spec["required"].([]any)
		spec["required"] = slices.DeleteFunc(slices.Clone(req), func(v any) bool { return v == "task" })
	}
	raw, _ := json.Marshal(doc)
	s, err := verify.CompileSchema(raw)
	if err != nil {
		return nil, fmt.Errorf("harness: docs/spec.schema.json: %w", err)
	}
	return s, nil
}

// jsonPath writes a path as ParseSpec names fields:
// "task.budgets.max_steps", "fallbacks[0].model".
func jsonPath(loc []string) string {
	var b strings.Builder
	for _, k := range loc {
		if _, err := strconv.Atoi(k); err == nil {
			b.WriteString("[" + k + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(k)
	}
	return b.String()
}
